/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// A memory resource that needs no GPU and records what an adaptor asks of it: the size and
// alignment of every allocation, the blocks live now, the frees that name a block it never handed
// out or a size other than the one allocated, the peak of the bytes live, and it can be told to
// throw. Its pointers sit `offset` bytes past a multiple of 8 MiB, so an adaptor that aligns
// further must move them (offset 256: as far as any alignment up to 8 MiB allows).

#include <rmm_next/alignment.hpp>
#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/compat_members.hpp>
#include <rmm_next/error.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

namespace rmm_next::test {

/** @brief One request an upstream received. */
struct recorded_request {
  std::size_t bytes;
  std::size_t alignment;
  friend bool operator==(recorded_request const&, recorded_request const&) = default;
};

/** @brief Host memory posing as device memory, recording its calls; copies share the records. */
class recording_resource : public detail::compat_members<recording_resource> {
  struct block {
    void* base;
    std::size_t bytes;
  };
  struct state {
    ~state()
    {
      for (auto const& [ptr, b] : live) {
        std::free(b.base);
      }
    }
    mutable std::mutex mutex;
    std::size_t offset{};
    std::vector<recorded_request> requests;
    std::size_t frees{};
    std::map<void*, block> live;
    std::size_t live_bytes{};
    std::size_t peak_bytes{};
    std::size_t bad_frees{};
    bool throw_next{};
  };

  template <class F>
  auto read(F&& f) const
  {
    std::lock_guard const lock{state_->mutex};
    return f(*state_);
  }

 public:
  /** @brief Memory alignment of the blocks' base: pointers are `offset` past a multiple of it. */
  static constexpr std::size_t base_alignment = std::size_t{8} << 20;

  explicit recording_resource(std::size_t offset = default_alignment)
    : state_{std::make_shared<state>()}
  {
    state_->offset = offset;
  }

  [[nodiscard]] void* allocate_sync(std::size_t bytes, std::size_t alignment = default_alignment)
  {
    std::lock_guard const lock{state_->mutex};
    state_->requests.push_back({bytes, alignment});
    if (state_->throw_next) { throw out_of_memory{"rmm_next::recording_resource: out_of_memory"}; }
    if (bytes == 0) { return nullptr; }
    std::size_t const total = (bytes + state_->offset + base_alignment - 1) / base_alignment;
    void* base              = std::aligned_alloc(base_alignment, total * base_alignment);
    if (base == nullptr) { throw std::bad_alloc{}; }
    void* ptr = static_cast<char*>(base) + state_->offset;
    state_->live.emplace(ptr, block{base, bytes});
    state_->live_bytes += bytes;
    state_->peak_bytes = std::max(state_->peak_bytes, state_->live_bytes);
    return ptr;
  }

  void deallocate_sync(void* ptr, std::size_t bytes, std::size_t = default_alignment) noexcept
  {
    if (ptr == nullptr) { return; }
    std::lock_guard const lock{state_->mutex};
    auto const it = state_->live.find(ptr);
    if (it == state_->live.end() || it->second.bytes != bytes) {
      ++state_->bad_frees;
      return;
    }
    ++state_->frees;
    state_->live_bytes -= bytes;
    std::free(it->second.base);
    state_->live.erase(it);
  }

  [[nodiscard]] void* allocate(cuda::stream_ref, std::size_t bytes, std::size_t alignment)
  {
    return allocate_sync(bytes, alignment);
  }

  void deallocate(cuda::stream_ref, void* ptr, std::size_t bytes, std::size_t alignment) noexcept
  {
    deallocate_sync(ptr, bytes, alignment);
  }

  /// CCCL 3.0's names of the members above, where its concepts require them.
  using detail::compat_members<recording_resource>::allocate;
  using detail::compat_members<recording_resource>::deallocate;

  /** @brief Every allocation request received, in order (also those that threw). */
  [[nodiscard]] std::vector<recorded_request> requests() const
  {
    return read([](state const& s) { return s.requests; });
  }
  /** @brief The last allocation request received. */
  [[nodiscard]] recorded_request last_request() const
  {
    return read(
      [](state const& s) { return s.requests.empty() ? recorded_request{} : s.requests.back(); });
  }
  /** @brief How many frees reached it with the right pointer and size. */
  [[nodiscard]] std::size_t frees() const
  {
    return read([](state const& s) { return s.frees; });
  }
  /** @brief Frees of a pointer it did not hand out (or no longer holds), or of another size. */
  [[nodiscard]] std::size_t bad_frees() const
  {
    return read([](state const& s) { return s.bad_frees; });
  }
  /** @brief The blocks handed out and not freed. */
  [[nodiscard]] std::size_t live_blocks() const
  {
    return read([](state const& s) { return s.live.size(); });
  }
  /** @brief The most bytes it held at once. */
  [[nodiscard]] std::size_t peak_bytes() const
  {
    return read([](state const& s) { return s.peak_bytes; });
  }
  /** @brief The pointer it handed out whose block holds `p`, nullptr if none. */
  [[nodiscard]] void* block_of(void const* p) const
  {
    std::lock_guard const lock{state_->mutex};
    auto const* c = static_cast<char const*>(p);
    for (auto const& [ptr, b] : state_->live) {
      auto const* start = static_cast<char const*>(ptr);
      if (c >= start && c < start + b.bytes) { return ptr; }
    }
    return nullptr;
  }
  /** @brief The size of the live block at `ptr`, 0 if none. */
  [[nodiscard]] std::size_t block_bytes(void* ptr) const
  {
    std::lock_guard const lock{state_->mutex};
    auto const it = state_->live.find(ptr);
    return it == state_->live.end() ? 0 : it->second.bytes;
  }
  /** @brief Makes every allocation throw `out_of_memory` (true) or succeed (false). */
  void throw_on_allocate(bool on)
  {
    std::lock_guard const lock{state_->mutex};
    state_->throw_next = on;
  }

  friend bool operator==(recording_resource const& lhs, recording_resource const& rhs) noexcept
  {
    return lhs.state_ == rhs.state_;
  }

  friend constexpr void get_property(recording_resource const&,
                                     cuda::mr::device_accessible) noexcept
  {
  }
  friend constexpr void get_property(recording_resource const&, cuda::mr::host_accessible) noexcept
  {
  }

 private:
  std::shared_ptr<state> state_;
};

static_assert(detail::stream_ordered_resource_with<recording_resource,
                                                   cuda::mr::device_accessible,
                                                   cuda::mr::host_accessible>);
static_assert(detail::synchronous_resource_with<recording_resource,
                                                cuda::mr::device_accessible,
                                                cuda::mr::host_accessible>);

}  // namespace rmm_next::test
