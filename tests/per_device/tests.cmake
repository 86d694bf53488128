# The per-device tests beyond per_device_resource_map_test.cpp / per_device_resource_gpu_test.cu:
# two shared libraries sharing the process-wide map, and programs that exit with resources set.
# Included from tests/CMakeLists.txt: include(per_device/tests.cmake).

set(per_device_dir ${CMAKE_CURRENT_LIST_DIR})
set(per_device_fail_regex "rmm_next::release: |terminate called|Assertion|Sanitizer")


# Two libraries built as RAPIDS libraries are: hidden visibility, one with g++, one with nvcc. A
# third stands for a library built against another rmm-next version: its ABI namespace differs.
add_library(per_device_library_a SHARED ${per_device_dir}/library_a.cpp)
add_library(per_device_library_b SHARED ${per_device_dir}/library_b.cu)
add_library(per_device_library_other_abi SHARED ${per_device_dir}/library_other_abi.cpp)
target_compile_definitions(per_device_library_other_abi PRIVATE RMM_NEXT_ABI_NAMESPACE=v0_0_cccl0)
foreach(lib IN ITEMS per_device_library_a per_device_library_b per_device_library_other_abi)
  target_include_directories(${lib} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(${lib} PRIVATE rmm-next::rmm-next)
  set_target_properties(${lib} PROPERTIES CXX_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET
                                          hidden VISIBILITY_INLINES_HIDDEN ON)
  rmm_next_enable_warnings(${lib})
endforeach()

rmm_next_add_test(NAME per_device_two_libraries LABEL cpu OWN_MAIN
                  SOURCES ${per_device_dir}/two_libraries_main.cpp
                  LIBRARIES per_device_library_a per_device_library_b per_device_library_other_abi)
rmm_next_register_test(per_device_two_libraries_gpu gpu "" per_device_two_libraries --with-device)

# Exiting with resources still set: status 0 and nothing reported.
rmm_next_add_test(NAME per_device_exit_cpu LABEL cpu OWN_MAIN SOURCES ${per_device_dir}/exit_cpu.cpp
                  MODES return exit)
rmm_next_add_test(NAME per_device_exit_gpu LABEL gpu OWN_MAIN SOURCES ${per_device_dir}/exit_gpu.cu
                  MODES return exit)
foreach(program IN ITEMS per_device_two_libraries per_device_exit_cpu per_device_exit_gpu)
  target_include_directories(${program} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}
                                                ${CMAKE_CURRENT_SOURCE_DIR}/support)
endforeach()
set_tests_properties(per_device_exit_cpu.return per_device_exit_cpu.exit per_device_exit_gpu.return
                     per_device_exit_gpu.exit PROPERTIES FAIL_REGULAR_EXPRESSION
                                                         "${per_device_fail_regex}")
