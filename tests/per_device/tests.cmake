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

add_executable(per_device_two_libraries ${per_device_dir}/two_libraries_main.cpp)
target_include_directories(per_device_two_libraries PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}
                                                            ${CMAKE_CURRENT_SOURCE_DIR}/support)
target_link_libraries(per_device_two_libraries PRIVATE rmm-next::rmm-next per_device_library_a
                                                       per_device_library_b
                                                       per_device_library_other_abi)
rmm_next_enable_warnings(per_device_two_libraries)
add_test(NAME per_device_two_libraries COMMAND per_device_two_libraries)
set_tests_properties(per_device_two_libraries PROPERTIES LABELS cpu)
add_test(NAME per_device_two_libraries_gpu COMMAND per_device_two_libraries --with-device)
rmm_next_gpu_test(per_device_two_libraries_gpu)

# Exiting with resources still set: status 0 and nothing reported.
add_executable(per_device_exit_cpu ${per_device_dir}/exit_cpu.cpp)
add_executable(per_device_exit_gpu ${per_device_dir}/exit_gpu.cu)
foreach(program IN ITEMS per_device_exit_cpu per_device_exit_gpu)
  target_include_directories(${program} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}
                                                ${CMAKE_CURRENT_SOURCE_DIR}/support)
  target_link_libraries(${program} PRIVATE rmm-next::rmm-next)
  rmm_next_enable_warnings(${program})
  foreach(mode IN ITEMS return exit)
    add_test(NAME ${program}.${mode} COMMAND ${program} ${mode})
    set_tests_properties(${program}.${mode} PROPERTIES FAIL_REGULAR_EXPRESSION
                                                       "${per_device_fail_regex}")
    if(program MATCHES "_gpu$")
      rmm_next_gpu_test(${program}.${mode})
    else()
      set_tests_properties(${program}.${mode} PROPERTIES LABELS cpu)
    endif()
  endforeach()
endforeach()
