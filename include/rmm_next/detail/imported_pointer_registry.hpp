/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <utility>

/**
 * @file
 * @brief The process's count of `imported_pointer`s per imported address: the driver maps an
 * allocation of another process once per process, and returns that one address to every import of
 * it, so the imports share one mapping and only the last may free it.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/**
 * @brief How many imports of this process hold each imported address.
 *
 * Keyed by address alone: an address is mapped once in a process, whatever pool handle it was
 * imported through. One mutex guards the counts, and is held across the driver's import and the
 * last free: an import that the driver answers with a mapped address and the free of that address
 * by its last holder then never overlap (the free would unmap what the import just handed out).
 * No CUDA call is made here: callers pass the import and the free. Callers never come here once
 * the runtime is unloading or in a forked child (`runtime_unloading`), where a lock held by a
 * thread of the parent would never be released.
 */
class imported_pointer_registry {
 public:
  /**
   * @brief Runs `import()`, which returns the address the driver mapped (not null) or throws, and
   * counts one more share of that address; if counting fails (`std::bad_alloc`) an address mapped
   * by this import alone is freed with `free(address)` before the exception propagates.
   */
  template <class Import, class Free>
  void* add_share(Import&& import, Free&& free)
  {
    std::lock_guard const lock{mutex_};
    void* const address = std::forward<Import>(import)();
    try {
      ++shares_[address];
    } catch (...) {
      if (!shares_.contains(address)) { std::forward<Free>(free)(address); }
      throw;
    }
    return address;
  }

  /**
   * @brief Gives up one share of `address`; when it was the last (or `address` was never
   * counted), forgets it and runs `free(address)`, which must not throw, before another import can
   * map it again.
   */
  template <class Free>
  void drop_share(void* address, Free&& free) noexcept
  {
    std::lock_guard const lock{mutex_};
    auto const it = shares_.find(address);
    if (it != shares_.end() && --it->second > 0) { return; }
    if (it != shares_.end()) { shares_.erase(it); }
    std::forward<Free>(free)(address);
  }

  /**
   * @brief Forgets `address` if one import holds it, so that its free becomes the caller's.
   * @return the number of shares it had: 1 (forgotten), more (shared: nothing changes) or 0 (not
   * counted).
   */
  std::size_t take_sole_share(void* address) noexcept
  {
    std::lock_guard const lock{mutex_};
    auto const it = shares_.find(address);
    if (it == shares_.end()) { return 0; }
    std::size_t const shares = it->second;
    if (shares == 1) { shares_.erase(it); }
    return shares;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<void*, std::size_t> shares_;
};

/**
 * @brief The process's registry of imported addresses.
 *
 * One per process (per ABI namespace), also across shared libraries built with hidden visibility
 * (`RMM_NEXT_EXPORT`). Never destroyed: an `imported_pointer` destroyed by a static destructor
 * after it still finds it.
 */
RMM_NEXT_EXPORT inline imported_pointer_registry& imported_pointers()
{
  static auto* const registry = new imported_pointer_registry{};
  return *registry;
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
