# NCCL beside rmm-next, for rmm_next/nccl.hpp's tests only (never part of the package: nccl.hpp
# looks NCCL up at run time). Found in the unpacked nvidia-nccl-cu13 wheel that
# -DRMM_NEXT_NCCL_ROOT names (pip install --no-deps --target DIR nvidia-nccl-cu13), else on the
# system's paths (the toolkit's include folder among them).
#
# Sets RMM_NEXT_NCCL_FOUND, RMM_NEXT_NCCL_INCLUDE_DIR, RMM_NEXT_NCCL_LIBRARY (may be empty: the
# CPU test needs only the header) and RMM_NEXT_NCCL_STATUS (why not, when not).

set(RMM_NEXT_NCCL_ROOT "" CACHE PATH "Unpacked nvidia-nccl-cu13 wheel: builds the nccl.hpp tests")

set(_nccl_hints)
if(RMM_NEXT_NCCL_ROOT)
  list(APPEND _nccl_hints "${RMM_NEXT_NCCL_ROOT}/nvidia/nccl" "${RMM_NEXT_NCCL_ROOT}")
endif()
find_path(RMM_NEXT_NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include)
find_library(RMM_NEXT_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_nccl_hints}
             ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64)
unset(_nccl_hints)

if(RMM_NEXT_NCCL_INCLUDE_DIR)
  set(RMM_NEXT_NCCL_FOUND ON)
  set(RMM_NEXT_NCCL_STATUS "")
else()
  set(RMM_NEXT_NCCL_FOUND OFF)
  set(RMM_NEXT_NCCL_STATUS "no nccl.h (set RMM_NEXT_NCCL_ROOT to an unpacked nvidia-nccl-cu13 wheel)")
endif()
