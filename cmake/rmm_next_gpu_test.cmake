#[=======================================================================[
rmm_next_gpu_test(<test> [EXCLUSIVE] [LABELS <more labels...>] [ENVIRONMENT <VAR=value...>])

The GPU-test policy, in one place: labels <test> `gpu` (plus LABELS), treats exit status 77 as
skipped (a program without a usable CUDA device exits 77 with a one-line reason), and with
RMM_NEXT_REQUIRE_GPU=ON passes RMM_NEXT_REQUIRE_GPU=1 to it, which turns that skip into a failure.
EXCLUSIVE runs it alone on the device (RESOURCE_LOCK rmm_next_gpu), for tests that read the
device's free memory. ENVIRONMENT is the rest of the test's environment.
#]=======================================================================]
function(rmm_next_gpu_test test)
  cmake_parse_arguments(PARSE_ARGV 1 arg "EXCLUSIVE" "" "LABELS;ENVIRONMENT")
  set(labels ${arg_LABELS} gpu)
  set(environment ${arg_ENVIRONMENT})
  if(RMM_NEXT_REQUIRE_GPU)
    list(APPEND environment RMM_NEXT_REQUIRE_GPU=1)
  endif()
  set_tests_properties(${test} PROPERTIES LABELS "${labels}" SKIP_RETURN_CODE 77)
  if(arg_EXCLUSIVE)
    set_tests_properties(${test} PROPERTIES RESOURCE_LOCK rmm_next_gpu)
  endif()
  if(environment)
    set_tests_properties(${test} PROPERTIES ENVIRONMENT "${environment}")
  endif()
endfunction()
