# cmake -P script: configure, build and run one consumer project of rmm-next.
#
#   -DPROJECT=<consumer project dir>   -DWORK_DIR=<scratch dir, wiped first>
#   -DGENERATOR=<generator>            -DCXX_COMPILER=<path>       -DBUILD_TYPE=<config>
#   [-DINSTALL_FROM=<rmm-next build dir>]  install it into WORK_DIR/prefix and find it there
#   [-DRMM_NEXT_DIR=<dir>]                 find_package(rmm-next) from this dir (e.g. build tree)
#   [-DRMM_NEXT_SOURCE_DIR=<dir>]          for the add_subdirectory / FetchContent projects
cmake_minimum_required(VERSION 3.25)

function(run_step what)
  message(STATUS "consumer: ${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "consumer: ${what} failed (${result})")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(args -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
         -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)

if(INSTALL_FROM)
  run_step("install" ${CMAKE_COMMAND} --install ${INSTALL_FROM} --prefix ${WORK_DIR}/prefix)
  list(APPEND args -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
endif()
if(RMM_NEXT_DIR)
  list(APPEND args -Drmm-next_DIR=${RMM_NEXT_DIR})
endif()
if(RMM_NEXT_SOURCE_DIR)
  list(APPEND args -DRMM_NEXT_SOURCE_DIR=${RMM_NEXT_SOURCE_DIR})
endif()

run_step("configure" ${CMAKE_COMMAND} -S ${PROJECT} -B ${WORK_DIR}/build ${args})
run_step("build" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)

execute_process(COMMAND ${WORK_DIR}/build/consumer RESULT_VARIABLE result OUTPUT_VARIABLE output)
message(STATUS "consumer: run: ${output}")
if(NOT result EQUAL 0 OR NOT output MATCHES "rmm-next consumer: OK")
  message(FATAL_ERROR "consumer: run failed (${result})")
endif()
