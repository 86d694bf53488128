/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// A memory resource that needs no GPU, for CPU-only tests: host memory from std::aligned_alloc
// that claims to be device- and host-accessible, so that it binds to every rmm-next ref type
// (device_async_resource_ref, host_device_async_resource_ref, device_resource_ref, ...).

#include <rmm_next/detail/cccl.hpp>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace rmm_next::test {

/**
 * @brief Host memory posing as device memory. Copies share one set of counters; two resources
 * compare equal when they are copies of each other.
 */
class fake_resource {
 public:
  /** @brief Counters shared by all copies of one resource. */
  struct counters {
    std::atomic<long> allocations{0};
    std::atomic<long> deallocations{0};
  };

  /** @param id A number the tests use to tell resources apart. */
  explicit fake_resource(int id = 0) : id_{id}, counters_{std::make_shared<counters>()} {}

  [[nodiscard]] int id() const noexcept { return id_; }
  [[nodiscard]] long allocations() const noexcept { return counters_->allocations.load(); }
  [[nodiscard]] long deallocations() const noexcept { return counters_->deallocations.load(); }
  /** @brief Observes the counters without keeping them alive (they die with the last copy). */
  [[nodiscard]] std::weak_ptr<counters const> lifetime() const noexcept { return counters_; }

  [[nodiscard]] void* allocate_sync(std::size_t bytes, std::size_t alignment = default_alignment)
  {
    if (bytes == 0) { return nullptr; }
    std::size_t const rounded = (bytes + alignment - 1) / alignment * alignment;
    void* ptr                 = std::aligned_alloc(alignment, rounded);
    if (ptr == nullptr) { throw std::bad_alloc{}; }
    counters_->allocations.fetch_add(1, std::memory_order_relaxed);
    return ptr;
  }

  void deallocate_sync(void* ptr, std::size_t, std::size_t = default_alignment) noexcept
  {
    if (ptr == nullptr) { return; }
    counters_->deallocations.fetch_add(1, std::memory_order_relaxed);
    std::free(ptr);
  }

  [[nodiscard]] void* allocate(cuda::stream_ref,
                               std::size_t bytes,
                               std::size_t alignment = default_alignment)
  {
    return allocate_sync(bytes, alignment);
  }

  void deallocate(cuda::stream_ref,
                  void* ptr,
                  std::size_t bytes,
                  std::size_t alignment = default_alignment) noexcept
  {
    deallocate_sync(ptr, bytes, alignment);
  }

  // CCCL 3.0 members (cuda::mr::resource / async_resource before CCCL 3.1).
  [[nodiscard]] void* allocate(std::size_t bytes, std::size_t alignment = default_alignment)
  {
    return allocate_sync(bytes, alignment);
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t alignment = default_alignment) noexcept
  {
    deallocate_sync(ptr, bytes, alignment);
  }
  [[nodiscard]] void* allocate_async(std::size_t bytes, std::size_t alignment, cuda::stream_ref)
  {
    return allocate_sync(bytes, alignment);
  }
  void deallocate_async(void* ptr,
                        std::size_t bytes,
                        std::size_t alignment,
                        cuda::stream_ref) noexcept
  {
    deallocate_sync(ptr, bytes, alignment);
  }

  friend bool operator==(fake_resource const& lhs, fake_resource const& rhs) noexcept
  {
    return lhs.counters_ == rhs.counters_;
  }

  friend constexpr void get_property(fake_resource const&, cuda::mr::device_accessible) noexcept {}
  friend constexpr void get_property(fake_resource const&, cuda::mr::host_accessible) noexcept {}

 private:
  int id_;
  std::shared_ptr<counters> counters_;
};

static_assert(detail::stream_ordered_resource_with<fake_resource,
                                                   cuda::mr::device_accessible,
                                                   cuda::mr::host_accessible>);
static_assert(detail::synchronous_resource_with<fake_resource,
                                                cuda::mr::device_accessible,
                                                cuda::mr::host_accessible>);

/** @brief Allocations and deallocations counted by a set of fake resources. */
struct allocation_totals {
  long allocations{0};
  long deallocations{0};
};

/** @brief The counts of every fake resource (or one derived from it) in `ranges`, summed. */
template <class... Ranges>
allocation_totals totals_of(Ranges const&... ranges)
{
  allocation_totals totals;
  auto const add = [&totals](auto const& range) {
    for (fake_resource const& r : range) {
      totals.allocations += r.allocations();
      totals.deallocations += r.deallocations();
    }
  };
  (add(ranges), ...);
  return totals;
}

/** @brief Allocates and frees 64 bytes through `ref`; true when `owner` counted both. */
template <class Ref>
bool allocates_from(Ref ref, fake_resource const& owner)
{
  long const allocations   = owner.allocations();
  long const deallocations = owner.deallocations();
  void* ptr                = ref.allocate_sync(64, 64);
  bool const allocated     = ptr != nullptr && owner.allocations() == allocations + 1;
  ref.deallocate_sync(ptr, 64, 64);
  return allocated && owner.deallocations() == deallocations + 1;
}

}  // namespace rmm_next::test
