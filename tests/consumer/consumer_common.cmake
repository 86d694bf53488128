# Shared by the consumer projects: a C++ and a CUDA executable, and (for vendored rmm-next) the
# checks that rmm-next built none of its tests, benchmarks or examples and enabled no language of
# ours.
add_executable(consumer ${CMAKE_CURRENT_LIST_DIR}/main.cpp)
target_link_libraries(consumer PRIVATE rmm-next::rmm-next)

if(RMM_NEXT_CONSUMER_VENDORED)
  foreach(target IN ITEMS error_test async_device_resource_gpu_test tour run-tour)
    if(TARGET ${target})
      message(FATAL_ERROR "vendored rmm-next must not define its target '${target}'")
    endif()
  endforeach()
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("CUDA" IN_LIST languages)
    message(FATAL_ERROR "vendored rmm-next must not enable CUDA in its consumer")
  endif()
endif()

# C++20 must reach nvcc from rmm-next::rmm-next alone: no CMAKE_CUDA_STANDARD here. The
# find_package project enabled CUDA before finding rmm-next, the vendored ones enable it only now.
enable_language(CUDA)
add_executable(consumer_cu ${CMAKE_CURRENT_LIST_DIR}/main.cu)
target_link_libraries(consumer_cu PRIVATE rmm-next::rmm-next)
# One runtime per process: the shared one that rmm-next::rmm-next links (CUDA::cudart).
set_target_properties(consumer_cu PROPERTIES CUDA_RUNTIME_LIBRARY Shared)
