/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// segment_cache_sim LOG [MAX_IDLE_MIB [MAX_IDLE_FRACTION]] - what segment_cache_adaptor decides
// on a recorded trace, on the CPU: every event of the log in log order through a
// segment_cache_adaptor whose upstream hands out addresses that are never touched (no GPU, no
// memory), so the options can be chosen from real traces on any machine. Prints one line: hits,
// misses (segments taken from the upstream), segments given back, the peak of the bytes the cache
// held of the upstream, and that peak over the log's peak in use; a second line splits what it held
// at that peak: live blocks, idle segments, and free blocks in segments that also hold a live one.
// Times are not measured here: replay_bench on a GPU measures them. Defaults:
// segment_cache_options{}. With RMM_NEXT_SIM_UPSTREAM_LOG=PATH it also writes the upstream's
// calls (the segments taken and given back) to PATH as a log of the same format, to replay them
// against a bare pool.
//
// The trace's streams are the handles it recorded, which no driver of this process knows: the sim
// answers the cache's look-up of the driver's entry points itself (none found), so the cache asks
// no driver about those handles, on a machine with a GPU as on one without.

#include "replay/log_parser.hpp"

#include <rmm_next/segment_cache_adaptor.hpp>

#include <cuda_runtime_api.h>
#include <cuda/stream_ref>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

namespace {

/** @brief An upstream of untouched addresses: counts requests and the bytes held. */
class address_upstream {
 public:
  struct counts {
    std::uintptr_t next = std::uintptr_t{1} << 40;
    std::size_t held    = 0;
    std::size_t peak    = 0;
    long requests       = 0;
    std::FILE* log = nullptr;  ///< the upstream's calls, as a trace (RMM_NEXT_SIM_UPSTREAM_LOG)
  };

  [[nodiscard]] void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t)
  {
    std::uintptr_t const address = c_->next;
    c_->next += (bytes + 4095) & ~std::size_t{4095};
    c_->held += bytes;
    c_->peak = c_->held > c_->peak ? c_->held : c_->peak;
    ++c_->requests;
    if (c_->log != nullptr) {
      std::fprintf(c_->log,
                   "0,0,allocate,%p,%zu,%#zx\n",
                   reinterpret_cast<void*>(address),
                   bytes,
                   reinterpret_cast<std::uintptr_t>(stream.get()));
    }
    return reinterpret_cast<void*>(address);
  }
  void deallocate(cuda::stream_ref stream, void* ptr, std::size_t bytes, std::size_t) noexcept
  {
    c_->held -= bytes;
    if (c_->log != nullptr) {
      std::fprintf(c_->log,
                   "0,0,free,%p,%zu,%#zx\n",
                   ptr,
                   bytes,
                   reinterpret_cast<std::uintptr_t>(stream.get()));
    }
  }
  [[nodiscard]] void* allocate_sync(std::size_t bytes, std::size_t alignment)
  {
    return allocate(cuda::stream_ref{cudaStream_t{}}, bytes, alignment);
  }
  void deallocate_sync(void* ptr, std::size_t bytes, std::size_t alignment) noexcept
  {
    deallocate(cuda::stream_ref{cudaStream_t{}}, ptr, bytes, alignment);
  }
  friend bool operator==(address_upstream const& a, address_upstream const& b) noexcept
  {
    return a.c_ == b.c_;
  }
  friend void get_property(address_upstream const&, cuda::mr::device_accessible) noexcept {}

  [[nodiscard]] counts const& get() const noexcept { return *c_; }
  [[nodiscard]] counts& get() noexcept { return *c_; }

 private:
  std::shared_ptr<counts> c_ = std::make_shared<counts>();
};

}  // namespace

/**
 * @brief Takes the place of libcudart's (the program's definition comes first): every driver
 * entry point is not found, so the cache runs as it does in a process without a driver.
 */
extern "C" cudaError_t cudaGetDriverEntryPointByVersion(char const* /*symbol*/,
                                                        void** function,
                                                        unsigned int /*version*/,
                                                        unsigned long long /*flags*/,
                                                        cudaDriverEntryPointQueryResult* status)
{
  *function = nullptr;
  if (status != nullptr) { *status = cudaDriverEntryPointSymbolNotFound; }
  return cudaSuccess;
}

int main(int argc, char** argv)
{
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: segment_cache_sim LOG [MAX_IDLE_MIB [MAX_IDLE_FRACTION]]\n");
    return 64;
  }
  try {
    namespace replay                        = rmm_next_bench::replay;
    std::vector<replay::event> const events = replay::parse_log_file(argv[1]);
    rmm_next::segment_cache_options options;
    if (argc > 2) { options.max_idle_bytes = std::strtoull(argv[2], nullptr, 10) << 20; }
    if (argc > 3) { options.max_idle_fraction = std::strtod(argv[3], nullptr); }
    address_upstream upstream;
    if (char const* path = std::getenv("RMM_NEXT_SIM_UPSTREAM_LOG"); path != nullptr) {
      upstream.get().log = std::fopen(path, "w");
      if (upstream.get().log == nullptr) {
        throw std::runtime_error{std::string{"cannot write "} + path};
      }
      std::fputs("Thread,Time,Action,Pointer,Size,Stream\n", upstream.get().log);
    }
    rmm_next::segment_cache_adaptor<address_upstream> cache{upstream, 0, options};
    std::unordered_map<std::uintptr_t, std::pair<void*, std::size_t>> live;
    std::size_t in_use = 0;
    std::size_t peak   = 0;
    rmm_next::segment_cache_statistics at_peak_held{};  // when the cache held the most
    std::size_t peak_held  = 0;
    std::size_t over_bound = 0;  // events after which the idle bytes were past the idle bound
    std::size_t most_over  = 0;
    for (replay::event const& e : events) {
      cuda::stream_ref const stream{reinterpret_cast<cudaStream_t>(e.stream)};
      if (e.act == replay::action::allocate) {
        live[e.pointer] = {cache.allocate(stream, e.size), e.size};
        in_use += e.size;
        peak = in_use > peak ? in_use : peak;
      } else if (e.act == replay::action::free) {
        auto const it = live.find(e.pointer);
        if (it == live.end()) { continue; }  // freed memory the log never showed allocated
        cache.deallocate(stream, it->second.first, it->second.second);
        in_use -= it->second.second;
        live.erase(it);
      }
      if (upstream.get().held > peak_held) {
        peak_held    = upstream.get().held;
        at_peak_held = cache.statistics();
      }
      if (auto const now = cache.statistics(); now.idle_bytes > now.idle_bound) {
        ++over_bound;
        most_over = std::max<std::size_t>(most_over, now.idle_bytes - now.idle_bound);
      }
    }
    auto const st    = cache.statistics();
    double const mib = 1 << 20;
    std::printf(
      "max_idle_bytes %zu MiB, max_idle_fraction %.3g: hits %llu, misses %llu, segments given "
      "back %llu; peak held %.1f MiB, peak in use %.1f MiB, held / in use %.3f\n",
      options.max_idle_bytes >> 20,
      options.max_idle_fraction,
      static_cast<unsigned long long>(st.hits),
      static_cast<unsigned long long>(st.misses),
      static_cast<unsigned long long>(st.released_segments),
      static_cast<double>(upstream.get().peak) / mib,
      static_cast<double>(peak) / mib,
      peak > 0 ? static_cast<double>(upstream.get().peak) / static_cast<double>(peak) : 0.0);
    auto const& h = at_peak_held;
    std::printf(
      "at the peak held: %llu segments, %.1f MiB live, %.1f MiB idle, %.1f MiB free in segments "
      "with a live block\n",
      static_cast<unsigned long long>(h.segments),
      static_cast<double>(h.live_bytes) / mib,
      static_cast<double>(h.idle_bytes) / mib,
      static_cast<double>(h.segment_bytes - h.live_bytes - h.idle_bytes) / mib);
    std::printf(
      "idle bytes past the idle bound after %zu of %zu events (at most %.1f MiB past it)\n",
      over_bound,
      events.size(),
      static_cast<double>(most_over) / mib);
    return 0;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "segment_cache_sim: %s\n", e.what());
    return 1;
  }
}
