# RMM 26.10 beside rmm-next, for the benchmarks' RMM peers and the interoperability tests only
# (never part of the package). RMM comes from the unpacked librmm-cu13 and rapids-logger wheels
# (benchmarks/fetch_rmm.sh DEST, then -DRMM_NEXT_RMM_ROOT=DEST).
#
# The wheel's CMake package needs CMake 4 and would replace the CCCL::CCCL target of the toolkit,
# so targets are wired by hand: rmm_next_use_rmm(<target>) compiles the whole target against the
# CCCL 3.5 that ships in the wheel (ahead of the toolkit's on the include path, for this target
# only), links the wheel's librmm.so and librapids_logger.so, and copies both next to it (found
# through $ORIGIN), so the build folder runs wherever it is carried.
#
# Sets RMM_NEXT_RMM_FOUND, and RMM_NEXT_RMM_STATUS (why not, when not).

set(RMM_NEXT_RMM_ROOT "" CACHE PATH "Unpacked librmm-cu13 + rapids-logger wheels \
(benchmarks/fetch_rmm.sh): builds RMM peers of the benchmarks and the RMM interoperability tests")

set(RMM_NEXT_RMM_FOUND OFF)
if(NOT RMM_NEXT_RMM_ROOT)
  set(RMM_NEXT_RMM_STATUS "RMM_NEXT_RMM_ROOT not set")
else()
  set(_rmm_root "${RMM_NEXT_RMM_ROOT}")
  set(RMM_NEXT_RMM_INCLUDE "${_rmm_root}/librmm/include")
  set(RMM_NEXT_RMM_CCCL "${_rmm_root}/librmm/include/rapids")
  set(RMM_NEXT_RMM_LIBRARY "${_rmm_root}/librmm/lib64/librmm.so")
  set(RMM_NEXT_RMM_LOGGER_INCLUDE "${_rmm_root}/rapids_logger/include")
  set(RMM_NEXT_RMM_LOGGER_LIBRARY "${_rmm_root}/rapids_logger/lib64/librapids_logger.so")
  set(RMM_NEXT_RMM_STATUS "")
  foreach(_file IN ITEMS "${RMM_NEXT_RMM_INCLUDE}/rmm/mr/arena_memory_resource.hpp"
                         "${RMM_NEXT_RMM_CCCL}/cuda/std/version" "${RMM_NEXT_RMM_LIBRARY}"
                         "${RMM_NEXT_RMM_LOGGER_INCLUDE}/rapids_logger/logger.hpp"
                         "${RMM_NEXT_RMM_LOGGER_LIBRARY}")
    if(NOT EXISTS "${_file}" AND NOT RMM_NEXT_RMM_STATUS)
      set(RMM_NEXT_RMM_STATUS "no ${_file} (RMM_NEXT_RMM_ROOT is not an unpacked "
                              "benchmarks/fetch_rmm.sh folder)")
    endif()
  endforeach()
  if(NOT RMM_NEXT_RMM_STATUS)
    set(RMM_NEXT_RMM_FOUND ON)
  endif()
  unset(_rmm_root)
endif()

#[=======================================================================[
rmm_next_use_rmm(<target>)

Compiles <target> against RMM and its CCCL 3.5 and links librmm.so (see above).
#]=======================================================================]
function(rmm_next_use_rmm target)
  # First on the include path: RMM's CCCL 3.5 must win over the toolkit's, which the toolkit's
  # CCCL package gives as -I (searched before every -isystem): so -I too, and BEFORE. (CCCL's
  # headers mark themselves as system headers.)
  target_include_directories(${target} BEFORE PRIVATE "${RMM_NEXT_RMM_CCCL}")
  target_include_directories(${target} SYSTEM PRIVATE "${RMM_NEXT_RMM_INCLUDE}"
                                                      "${RMM_NEXT_RMM_LOGGER_INCLUDE}")
  # What RMM's CMake package gives CCCL::CCCL (the ABI librmm.so was built with).
  target_compile_definitions(
    ${target} PRIVATE CUB_DISABLE_NAMESPACE_MAGIC CUB_IGNORE_NAMESPACE_MAGIC_ERROR
                      THRUST_DISABLE_ABI_NAMESPACE THRUST_IGNORE_ABI_NAMESPACE_ERROR CCCL_DISABLE_PDL)
  target_link_libraries(${target} PRIVATE "${RMM_NEXT_RMM_LIBRARY}" "${RMM_NEXT_RMM_LOGGER_LIBRARY}")
  set_property(TARGET ${target} APPEND PROPERTY BUILD_RPATH "\$ORIGIN")
  add_custom_command(
    TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -E copy_if_different "${RMM_NEXT_RMM_LIBRARY}"
            "${RMM_NEXT_RMM_LOGGER_LIBRARY}" $<TARGET_FILE_DIR:${target}>
    COMMENT "Copying librmm.so and librapids_logger.so next to ${target}")
endfunction()
