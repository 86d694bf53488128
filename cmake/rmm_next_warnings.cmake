# Warnings are errors in rmm-next's own targets (tests, benchmarks, examples); never pushed
# onto consumers through the rmm-next INTERFACE target.
include_guard(GLOBAL)

function(rmm_next_enable_warnings target)
  target_compile_options(
    ${target}
    PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror>
            $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror>)
endfunction()
