# The CUDA architectures rmm-next's own tests, benchmarks and examples build for when the user
# names none (-DCMAKE_CUDA_ARCHITECTURES=..., or the CUDAARCHS environment variable, which also
# works with `cmake --workflow`): those of the GPUs that nvidia-smi reports, so that everything
# runs on this machine's GPUs. Without a GPU (or nvidia-smi) it sets nothing and CMake takes nvcc's
# default: its oldest supported architecture plus PTX, which newer GPUs compile when loading it.
# `native` is not used: it fails to configure on a machine without a GPU.
include_guard(GLOBAL)

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
  find_program(RMM_NEXT_NVIDIA_SMI nvidia-smi)
  mark_as_advanced(RMM_NEXT_NVIDIA_SMI)
  set(_rmm_next_archs)
  if(RMM_NEXT_NVIDIA_SMI)
    execute_process(COMMAND ${RMM_NEXT_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE _rmm_next_caps RESULT_VARIABLE _rmm_next_result ERROR_QUIET)
    if(_rmm_next_result EQUAL 0)
      string(REGEX MATCHALL "[0-9]+\\.[0-9]+" _rmm_next_caps "${_rmm_next_caps}")
      foreach(_rmm_next_cap IN LISTS _rmm_next_caps)
        string(REPLACE "." "" _rmm_next_cap "${_rmm_next_cap}")
        list(APPEND _rmm_next_archs ${_rmm_next_cap})
      endforeach()
      list(REMOVE_DUPLICATES _rmm_next_archs)
    endif()
  endif()
  if(_rmm_next_archs)
    set(CMAKE_CUDA_ARCHITECTURES "${_rmm_next_archs}"
        CACHE STRING "CUDA architectures to build for (default: the GPUs nvidia-smi reports)")
    message(STATUS "rmm-next: CUDA architectures ${_rmm_next_archs}: the GPUs nvidia-smi reports")
  else()
    message(STATUS "rmm-next: no GPU reported by nvidia-smi: CUDA architectures are nvcc's default")
  endif()
  unset(_rmm_next_archs)
  unset(_rmm_next_caps)
  unset(_rmm_next_cap)
  unset(_rmm_next_result)
endif()
