# cmake -P script: every public header, compiled alone below C++20, stops at once with the one
# #error of rmm_next/detail/cxx20_check.hpp, and no other file reports anything.
#
#   -DCOMPILER=<g++ or nvcc>  [-DHOST_COMPILER=<nvcc's -ccbin>]  -DINCLUDE_DIR=<rmm-next include/>
#   -DWORK_DIR=<scratch dir>  -DEXPECTED=<the #error message>
cmake_minimum_required(VERSION 3.25)

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
file(GLOB headers RELATIVE ${INCLUDE_DIR}/rmm_next ${INCLUDE_DIR}/rmm_next/*.hpp)
if(NOT headers)
  message(FATAL_ERROR "no public headers under ${INCLUDE_DIR}/rmm_next")
endif()

get_filename_component(compiler_name ${COMPILER} NAME)
set(command ${COMPILER} -std=c++17 -I${INCLUDE_DIR})
if(compiler_name MATCHES "nvcc")
  set(extension cu)
  if(HOST_COMPILER)
    list(APPEND command -ccbin ${HOST_COMPILER})
  endif()
else()
  set(extension cpp)
endif()

set(failures 0)
foreach(header IN LISTS headers)
  set(source ${WORK_DIR}/${header}.${extension})
  file(WRITE ${source} "#include <rmm_next/${header}>\n")
  execute_process(COMMAND ${command} -c ${source} -o ${source}.o RESULT_VARIABLE result
                  OUTPUT_VARIABLE output ERROR_VARIABLE output)
  # Every diagnostic must come from cxx20_check.hpp (the #error, and the include that stops g++).
  string(REPLACE ";" "," lines "${output}") # one list item per diagnostic line
  string(REGEX MATCHALL "[^\n]*(error|warning):[^\n]*" diagnostics "${lines}")
  set(foreign ${diagnostics})
  list(FILTER foreign EXCLUDE REGEX "cxx20_check\\.hpp:")
  string(FIND "${output}" "#error \"${EXPECTED}\"" at)
  if(result EQUAL 0 OR at EQUAL -1 OR foreign)
    math(EXPR failures "${failures} + 1")
    message("FAIL  rmm_next/${header} with ${compiler_name} -std=c++17 (exit ${result}):\n${output}")
  else()
    message("PASS  rmm_next/${header}")
  endif()
endforeach()

if(failures)
  message(FATAL_ERROR "${failures} public header(s) do not stop with the C++20 #error")
endif()
