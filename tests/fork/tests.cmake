# A child forked from a process whose statics hold CUDA state exits with status 0 (child_exit.cpp),
# with assertions on (debug) and with NDEBUG (release), against the CUDA runtime (gpu) and
# against the fake runtime, whose calls fail in a forked child (cpu).
# Included from tests/CMakeLists.txt: include(fork/tests.cmake).

set(fork_dir ${CMAKE_CURRENT_LIST_DIR})

foreach(runtime IN ITEMS cpu gpu)
  foreach(flavour IN ITEMS debug release)
    set(program fork_child_exit_${runtime}_${flavour})
    add_executable(${program} ${fork_dir}/child_exit.cpp)
    target_include_directories(${program} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/support)
    target_link_libraries(${program} PRIVATE rmm-next::rmm-next)
    target_link_options(${program} PRIVATE -rdynamic)  # a crashing child names its frames
    rmm_next_enable_warnings(${program})
    if(flavour STREQUAL "debug")
      target_compile_definitions(${program} PRIVATE RMM_NEXT_TEST_ASSERTS)
    else()
      target_compile_definitions(${program} PRIVATE NDEBUG)
    endif()
    add_test(NAME ${program} COMMAND ${program})
    set_tests_properties(${program} PROPERTIES FAIL_REGULAR_EXPRESSION
                                               "rmm_next::release: |terminate called|Assertion")
    if(runtime STREQUAL "cpu")
      target_sources(${program} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/support/fake_cuda_runtime.cpp)
      set_tests_properties(${program} PROPERTIES LABELS cpu)
    else()
      rmm_next_gpu_test(${program} EXCLUSIVE)
    endif()
  endforeach()
endforeach()
