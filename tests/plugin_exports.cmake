# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
#
# cmake -DNM=<nm> -DLIBRARY=<librmm_next_allocator.so> -P plugin_exports.cmake
#
# Fails when the plugin's dynamic symbol table defines anything but its C functions (rmm_next_*)
# and names of namespace rmm_next. The plugin is loaded with RTLD_GLOBAL: a standard-library
# function it exported would be the one every library loaded later binds to (cuDNN's engines,
# loaded at PyTorch's first convolution, crashed in the plugin's copy of an ostream function).
if(NOT NM OR NOT LIBRARY)
  message(FATAL_ERROR "plugin_exports.cmake: pass -DNM=... and -DLIBRARY=...")
endif()
execute_process(COMMAND "${NM}" -D --defined-only "${LIBRARY}" OUTPUT_VARIABLE table
                RESULT_VARIABLE status ERROR_VARIABLE errors)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "plugin_exports.cmake: ${NM} -D ${LIBRARY} failed (${status}): ${errors}")
endif()
string(REPLACE "\n" ";" lines "${table}")
set(ours 0)
set(foreign "")
foreach(line IN LISTS lines)
  # "<address> <type> <name>": absolute symbols (version nodes, type A) are the linker's.
  if(NOT line MATCHES "^[0-9a-fA-F]+ ([A-Za-z]) ([^ ]+)$" OR CMAKE_MATCH_1 STREQUAL "A")
    continue()
  endif()
  set(name "${CMAKE_MATCH_2}")
  if(name MATCHES "^(rmm_next_|_ZN8rmm_next|_ZZN8rmm_next|_ZGVZN8rmm_next)")
    math(EXPR ours "${ours} + 1")
  else()
    list(APPEND foreign "${name}")
  endif()
endforeach()
if(foreign)
  list(LENGTH foreign count)
  list(JOIN foreign "\n  " shown)
  message(FATAL_ERROR "${LIBRARY} exports ${count} symbols outside rmm-next:\n  ${shown}")
endif()
if(NOT table MATCHES " T rmm_next_torch_alloc\n" OR NOT table MATCHES "get_per_device_resource_map")
  message(FATAL_ERROR "${LIBRARY} lacks rmm_next_torch_alloc or the process-wide map:\n${table}")
endif()
message(STATUS "${LIBRARY}: ${ours} symbols exported, all rmm-next's")
