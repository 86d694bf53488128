# Gives nvcc its C++20 flag on CMake 3.25.0 and 3.25.1, which do not know it: there, cxx_std_20
# (and CMAKE_CUDA_STANDARD 20) add nothing to a .cu compilation and nvcc compiles it as C++17.
# CMake 3.25.2 and later know the flag; this file then does nothing.
#
# Included by rmm-next's CMakeLists.txt (also when vendored with add_subdirectory, FetchContent or
# CPM) and by the package config (find_package), so .cu consumers get C++20 on every CMake that
# rmm-next accepts. The flag is a cache entry so that it reaches every directory and function scope
# of the consumer, whether CUDA is enabled before or after rmm-next is added. A CUDA compiler that
# CMake knows sets its own flag when enabled, which takes precedence over the cache entry.
include_guard(GLOBAL)

if(CMAKE_VERSION VERSION_LESS 3.25.2
   AND NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION
   AND (NOT CMAKE_CUDA_COMPILER_ID OR CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA"))
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20"
      CACHE INTERNAL "nvcc's C++20 flag, which CMake < 3.25.2 lacks (set by rmm-next)")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20"
      CACHE INTERNAL "nvcc's C++20 flag, which CMake < 3.25.2 lacks (set by rmm-next)")
endif()
