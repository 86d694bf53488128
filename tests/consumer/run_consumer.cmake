# cmake -P script: configure, build and run one consumer project of rmm-next with a given CMake.
#
#   -DPROJECT=<consumer project dir>   -DWORK_DIR=<scratch dir, wiped first>
#   -DCONSUMER_CMAKE=<the cmake that configures and builds the consumer>
#   -DGENERATOR=<generator>            -DBUILD_TYPE=<config>
#   -DCXX_COMPILER=<path>  -DCUDA_COMPILER=<path>  -DCUDA_ARCHITECTURES=<archs, comma-separated>
#   [-DCUDA_HOST_COMPILER=<path>]
#   [-DINSTALL_FROM=<rmm-next build dir>]  install it into WORK_DIR/prefix and find it there
#   [-DRMM_NEXT_DIR=<dir>]                 find_package(rmm-next) from this dir (e.g. build tree)
#   [-DRMM_NEXT_SOURCE_DIR=<dir>]          for the add_subdirectory / FetchContent projects
#   [-DVENDORED_INSTALLS=ON|OFF]           install the consumer and check whether the vendored
#                                          rmm-next installed itself with it
cmake_minimum_required(VERSION 3.25)

function(run_step what)
  message(STATUS "consumer: ${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "consumer: ${what} failed (${result})")
  endif()
endfunction()

# Fails unless each of ARGN exists under `prefix` (expected ON) or none does (expected OFF).
function(check_installed prefix expected)
  foreach(path IN LISTS ARGN)
    if(EXISTS ${prefix}/${path} AND NOT expected)
      message(FATAL_ERROR "consumer: ${prefix}/${path} was installed, but should not be")
    elseif(NOT EXISTS ${prefix}/${path} AND expected)
      message(FATAL_ERROR "consumer: ${prefix}/${path} was not installed")
    endif()
  endforeach()
endfunction()
set(rmm_next_files include/rmm_next/rmm_next.hpp share/doc/rmm-next/LICENSE)

file(REMOVE_RECURSE ${WORK_DIR})
string(REPLACE "," ";" CUDA_ARCHITECTURES "${CUDA_ARCHITECTURES}")
set(args
    -G ${GENERATOR} -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
    -DCMAKE_CUDA_COMPILER=${CUDA_COMPILER} "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}"
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
if(CUDA_HOST_COMPILER)
  list(APPEND args -DCMAKE_CUDA_HOST_COMPILER=${CUDA_HOST_COMPILER})
endif()

if(INSTALL_FROM)
  run_step("install rmm-next" ${CMAKE_COMMAND} --install ${INSTALL_FROM} --prefix ${WORK_DIR}/prefix)
  check_installed(${WORK_DIR}/prefix ON ${rmm_next_files} lib/cmake/rmm-next/rmm-next-config.cmake
                  lib/cmake/rmm-next/rmm_next_cuda_cxx20.cmake)
  list(APPEND args -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
endif()
if(RMM_NEXT_DIR)
  list(APPEND args -Drmm-next_DIR=${RMM_NEXT_DIR})
endif()
if(RMM_NEXT_SOURCE_DIR)
  list(APPEND args -DRMM_NEXT_SOURCE_DIR=${RMM_NEXT_SOURCE_DIR})
endif()

execute_process(COMMAND ${CONSUMER_CMAKE} --version OUTPUT_VARIABLE version)
string(REGEX MATCH "[0-9][^\n]*" version "${version}")
run_step("configure with CMake ${version}" ${CONSUMER_CMAKE} -S ${PROJECT} -B ${WORK_DIR}/build
         ${args})
run_step("build" ${CONSUMER_CMAKE} --build ${WORK_DIR}/build)

foreach(program IN ITEMS consumer consumer_cu)
  execute_process(COMMAND ${WORK_DIR}/build/${program} RESULT_VARIABLE result
                  OUTPUT_VARIABLE output)
  message(STATUS "consumer: run ${program}: ${output}")
  if(NOT result EQUAL 0 OR NOT output MATCHES "rmm-next consumer: OK")
    message(FATAL_ERROR "consumer: run ${program} failed (${result})")
  endif()
endforeach()

if(DEFINED VENDORED_INSTALLS)
  run_step("install the consumer" ${CONSUMER_CMAKE} --install ${WORK_DIR}/build --prefix
           ${WORK_DIR}/consumer-prefix)
  check_installed(${WORK_DIR}/consumer-prefix ${VENDORED_INSTALLS} ${rmm_next_files})
endif()
