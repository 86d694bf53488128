/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// A model pool whose next call, once armed, waits until released: a thread held there keeps the
// lock its caller holds around the upstream call (a cache's miss, a flush), for tests of what
// another thread, or a child forked meanwhile, does then; and the destruction of a cache in a
// forked child, checked against the model.

#include "forked_child.hpp"
#include "model_pool.hpp"

#include <rmm_next/error.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <utility>

namespace model {

/** @brief Where a `parking_pool`'s call waits, and what lets it go on. */
struct parking {
  std::atomic<bool> armed{false};    ///< the next allocate or deallocate parks
  std::atomic<bool> inside{false};   ///< one has parked
  std::atomic<bool> release{false};  ///< the parked one may go on

  /** @brief Parks the calling thread when armed (once), until released. */
  void maybe_park() noexcept
  {
    if (!armed.exchange(false)) { return; }
    inside = true;
    while (!release) {
      std::this_thread::sleep_for(std::chrono::milliseconds{1});
    }
  }

  /** @brief Waits until a call has parked. */
  void wait_inside() const noexcept
  {
    while (!inside) {
      std::this_thread::sleep_for(std::chrono::milliseconds{1});
    }
  }
};

/** @brief A `model_pool` whose allocate and deallocate park at `park` first. */
struct parking_pool : model_pool {
  parking_pool(std::size_t bytes, std::shared_ptr<parking> p)
    : model_pool{bytes}, park{std::move(p)}
  {
  }
  [[nodiscard]] void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment)
  {
    park->maybe_park();
    return model_pool::allocate(stream, bytes, alignment);
  }
  void deallocate(cuda::stream_ref stream,
                  void* p,
                  std::size_t bytes,
                  std::size_t alignment) noexcept
  {
    park->maybe_park();
    model_pool::deallocate(stream, p, bytes, alignment);
  }
  std::shared_ptr<parking> park;
};

/**
 * @brief In a child forked while a parent thread held the lock of what `owner` holds: reads its
 * statistics, which must throw `rmm_next::logic_error`, then destroys it (the parent keeps its
 * own). "" when the child did so without hanging (60 s), releasing a retain of the primary context
 * of device 0, or making a driver call the model refused; else what went wrong.
 */
template <class T>
std::string destroyed_in_forked_child(std::unique_ptr<T>& owner)
{
  int const retains        = the().primary_retains[0];
  std::string const result = rmm_next::test::run_in_forked_child([&] {
    the().violations.clear();
    int code = 0;
    try {
      (void)owner->statistics();
      code |= 4;
    } catch (rmm_next::logic_error const& e) {
      if (std::string{e.what()}.find("forked") == std::string::npos) { code |= 8; }
    }
    owner.reset();
    if (the().primary_retains[0] != retains) { code |= 1; }
    if (!the().violations.empty()) { code |= 2; }
    return code;
  });
  return result.empty() ? result
                        : result +
                            " (exit bits: 1 a retain was released, 2 a driver call the "
                            "model refused, 4 statistics read, 8 another error)";
}

}  // namespace model
