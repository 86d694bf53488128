# NVTX tests: an injection library of the suite's own (injection.cpp) records the NVTX calls that
# arrive; NVTX loads it from NVTX_INJECTION64_PATH, and the test programs link it to read what it
# recorded.
#   nvtx_test       cpu: statistics_adaptor over a fake resource, the region helpers, and a
#                   translation unit compiled with NVTX off in the same program
#   nvtx_gpu_test   gpu: the async resources' own ranges and allocation names
#   nvtx_compute_sanitizer
#                   gpu: sanitizer_program.cu under compute-sanitizer prints no NVTX warning
#                   (skipped where compute-sanitizer is not installed)
# Included from tests/CMakeLists.txt. Nothing to test when NVTX is compiled out.
if(NOT RMM_NEXT_ENABLE_NVTX OR NOT TARGET CUDA::nvtx3)
  return()
endif()

set(nvtx_dir ${CMAKE_CURRENT_LIST_DIR})

add_library(rmm_next_nvtx_injection SHARED ${nvtx_dir}/injection.cpp)
target_compile_features(rmm_next_nvtx_injection PRIVATE cxx_std_20)
target_link_libraries(rmm_next_nvtx_injection PRIVATE CUDA::nvtx3)
rmm_next_enable_warnings(rmm_next_nvtx_injection)

set(nvtx_injection_env "NVTX_INJECTION64_PATH=$<TARGET_FILE:rmm_next_nvtx_injection>")

# nvtx_off_tu.cpp shares the program with NVTX off.
set_source_files_properties(${nvtx_dir}/nvtx_off_tu.cpp PROPERTIES COMPILE_DEFINITIONS
                                                                   RMM_NEXT_DISABLE_NVTX)
rmm_next_add_test(NAME nvtx_test LABEL cpu SOURCES ${nvtx_dir}/nvtx_test.cpp ${nvtx_dir}/nvtx_off_tu.cpp
                  LIBRARIES rmm_next_nvtx_injection ENVIRONMENT ${nvtx_injection_env})
rmm_next_add_test(NAME nvtx_gpu_test LABEL gpu SOURCES ${nvtx_dir}/nvtx_gpu_test.cu
                  LIBRARIES rmm_next_nvtx_injection ENVIRONMENT ${nvtx_injection_env})
foreach(program IN ITEMS nvtx_test nvtx_gpu_test)
  target_include_directories(${program} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${nvtx_dir})
  # Used when the program runs outside CTest (trace.hpp).
  target_compile_definitions(
    ${program} PRIVATE RMM_NEXT_TEST_NVTX_INJECTION="$<TARGET_FILE:rmm_next_nvtx_injection>")
endforeach()

# compute-sanitizer takes the place of the injection library here: no NVTX_INJECTION64_PATH.
find_program(RMM_NEXT_COMPUTE_SANITIZER compute-sanitizer
             HINTS ${CUDAToolkit_BIN_DIR} ${CUDAToolkit_BIN_DIR}/../compute-sanitizer)
add_executable(nvtx_sanitizer_program ${nvtx_dir}/sanitizer_program.cu)
target_include_directories(nvtx_sanitizer_program PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/support)
target_link_libraries(nvtx_sanitizer_program PRIVATE rmm-next::rmm-next)
rmm_next_enable_warnings(nvtx_sanitizer_program)
add_test(NAME nvtx_compute_sanitizer
         COMMAND bash ${nvtx_dir}/run_sanitizer.sh "${RMM_NEXT_COMPUTE_SANITIZER}"
                 $<TARGET_FILE:nvtx_sanitizer_program>)
rmm_next_gpu_test(nvtx_compute_sanitizer EXCLUSIVE)
