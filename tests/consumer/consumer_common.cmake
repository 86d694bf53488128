# Shared by the consumer projects: the executable, and (for vendored rmm-next) the checks that
# rmm-next built none of its tests, benchmarks or examples and enabled no language of ours.
add_executable(consumer ${CMAKE_CURRENT_LIST_DIR}/main.cpp)
target_link_libraries(consumer PRIVATE rmm-next::rmm-next)

if(RMM_NEXT_CONSUMER_VENDORED)
  foreach(target IN ITEMS error_test async_device_resource_test tour run-tour)
    if(TARGET ${target})
      message(FATAL_ERROR "vendored rmm-next must not define its target '${target}'")
    endif()
  endforeach()
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("CUDA" IN_LIST languages)
    message(FATAL_ERROR "vendored rmm-next must not enable CUDA in its consumer")
  endif()
endif()
