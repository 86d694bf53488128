# cmake -P script that CTest runs after the tests (CTEST_CUSTOM_POST_TEST, written by
# tests/CMakeLists.txt). CTest shows a skipped test's output only with -V; this prints the reasons
# the skipped tests gave (tests/support/gpu_check.hpp appends each to LOG), one line per reason.
#
#   -DLOG=<file with one reason per line>
cmake_minimum_required(VERSION 3.25)

if(NOT EXISTS "${LOG}")
  return()
endif()
# One list entry per line; a semicolon inside a reason must not split it.
file(READ "${LOG}" text)
string(REPLACE ";" "<semicolon>" text "${text}")
string(REGEX REPLACE "\n$" "" text "${text}")
string(REPLACE "\n" ";" skips "${text}")
set(reasons ${skips})
list(REMOVE_DUPLICATES reasons)
foreach(reason IN LISTS reasons)
  set(count 0)
  foreach(skip IN LISTS skips)
    if(skip STREQUAL reason)
      math(EXPR count "${count} + 1")
    endif()
  endforeach()
  string(REPLACE "<semicolon>" ";" shown "${reason}")
  message("Skipped ${count} test(s): ${shown}")
endforeach()
