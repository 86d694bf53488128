# Provides the target CCCL::CCCL for rmm-next, used by the build and by the installed package.
#
# CCCL ships inside the CUDA toolkit: prefer its CMake package (or a newer one the user points
# CCCL_DIR / CMAKE_PREFIX_PATH at) and fall back to the headers in the toolkit's include dir.
# Expects find_package(CUDAToolkit) to have run.
include_guard(GLOBAL)

if(NOT TARGET CCCL::CCCL)
  find_package(CCCL CONFIG QUIET HINTS "${CUDAToolkit_LIBRARY_ROOT}/lib/cmake"
               "${CUDAToolkit_TARGET_DIR}/lib/cmake")
endif()

if(NOT TARGET CCCL::CCCL)
  set(_rmm_next_cccl_dirs)
  foreach(_dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
    if(EXISTS "${_dir}/cccl/cuda/std/version")
      list(APPEND _rmm_next_cccl_dirs "${_dir}/cccl") # CUDA 13 layout
    elseif(EXISTS "${_dir}/cuda/std/version")
      list(APPEND _rmm_next_cccl_dirs "${_dir}") # CUDA 12 layout
    endif()
  endforeach()
  if(NOT _rmm_next_cccl_dirs)
    message(FATAL_ERROR "rmm-next: CCCL not found: neither find_package(CCCL CONFIG) nor the "
                        "CUDA toolkit include dirs (${CUDAToolkit_INCLUDE_DIRS}) provide it")
  endif()
  message(STATUS "rmm-next: CCCL CMake package not found, using headers in ${_rmm_next_cccl_dirs}")
  add_library(CCCL::CCCL INTERFACE IMPORTED GLOBAL)
  target_include_directories(CCCL::CCCL SYSTEM INTERFACE ${_rmm_next_cccl_dirs})
  unset(_rmm_next_cccl_dirs)
  unset(_dir)
endif()
