/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// One allocation imported several times in one process, against the fake runtime of
// tests/support/fake_cuda_runtime.cpp, whose cudaMemPoolImportPointer maps an allocation once and
// returns the same address for every import while it stays mapped (as the driver does), and whose
// cudaFree fails for an address that is not mapped. The imports share the mapping: it is freed
// once, by the last imported_pointer, on one thread or many, and never in a forked child.

#include "support/fake_cuda_runtime.hpp"
#include "support/forked_child.hpp"

#include <rmm_next/ipc.hpp>

#include <cuda_runtime_api.h>

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

namespace fake = rmm_next::test::fake_cuda;
using rmm_next::imported_pointer;

/** @brief A pool imported (on the fake) from a handle that wraps a pipe's read end. */
rmm_next::imported_pool import_some_pool()
{
  std::array<int, 2> fds{-1, -1};
  EXPECT_EQ(::pipe2(fds.data(), O_CLOEXEC), 0);
  ::close(fds[1]);
  rmm_next::shareable_pool_handle const handle{fds[0]};
  return rmm_next::import_pool(handle, 0);
}

/** @brief The export of the `i`-th allocation of the exporting process (never dereferenced). */
rmm_next::pool_pointer_export export_allocation(std::uintptr_t i)
{
  return rmm_next::export_pointer(reinterpret_cast<void*>(0x7f0000000000 + i * 0x100000));
}

fake::ipc_driver ipc()
{
  std::lock_guard const lock{fake::ipc_mutex()};
  return fake::fake().ipc;
}

class IpcSharedImports : public ::testing::Test {
 protected:
  void SetUp() override { fake::reset(); }
  void TearDown() override { fake::reset(); }
};

TEST_F(IpcSharedImports, TwoImportsOfOneExportShareOneMappingFreedAtTheSecondDestruction)
{
  rmm_next::imported_pool const pool           = import_some_pool();
  rmm_next::pool_pointer_export const exported = export_allocation(1);
  std::optional<imported_pointer> first{rmm_next::import_pointer(pool, exported)};
  std::optional<imported_pointer> second{rmm_next::import_pointer(pool, exported)};
  void* const address = first->get();
  ASSERT_NE(address, nullptr);
  EXPECT_EQ(second->get(), address) << "the fake maps an allocation once, as the driver does";
  EXPECT_EQ(ipc().pointers_imported, 2);
  EXPECT_EQ(ipc().mappings_made, 1);

  first.reset();
  EXPECT_EQ(ipc().free_calls, 0) << "the first destruction freed a mapping the second still uses";
  EXPECT_TRUE(fake::is_mapped(address));
  EXPECT_EQ(second->get(), address);

  second.reset();
  EXPECT_EQ(ipc().free_calls, 1);
  EXPECT_EQ(ipc().imported_frees, 1);
  EXPECT_EQ(ipc().failed_frees, 0);
  EXPECT_FALSE(fake::is_mapped(address));
}

TEST_F(IpcSharedImports, AnImportAfterTheLastOneWentMapsAndFreesAgain)
{
  rmm_next::imported_pool const pool           = import_some_pool();
  rmm_next::pool_pointer_export const exported = export_allocation(1);
  {
    imported_pointer const once = rmm_next::import_pointer(pool, exported);
  }
  EXPECT_EQ(ipc().imported_frees, 1);
  {
    imported_pointer const again = rmm_next::import_pointer(pool, exported);
    EXPECT_TRUE(fake::is_mapped(again.get()));
    EXPECT_EQ(ipc().mappings_made, 2);
  }
  EXPECT_EQ(ipc().imported_frees, 2);
  EXPECT_EQ(ipc().failed_frees, 0);
}

TEST_F(IpcSharedImports, ImportsOfDifferentAllocationsAreFreedEachAtItsOwnDestruction)
{
  rmm_next::imported_pool const pool = import_some_pool();
  std::optional<imported_pointer> a{rmm_next::import_pointer(pool, export_allocation(1))};
  std::optional<imported_pointer> b{rmm_next::import_pointer(pool, export_allocation(2))};
  ASSERT_NE(a->get(), b->get());
  void* const b_address = b->get();
  a.reset();
  EXPECT_EQ(ipc().imported_frees, 1);
  EXPECT_TRUE(fake::is_mapped(b_address));
  b.reset();
  EXPECT_EQ(ipc().imported_frees, 2);
  EXPECT_EQ(ipc().failed_frees, 0);
}

TEST_F(IpcSharedImports, MovedFromImportsFreeNothingAndTheLastHolderFreesOnce)
{
  rmm_next::imported_pool const pool           = import_some_pool();
  rmm_next::pool_pointer_export const exported = export_allocation(1);
  imported_pointer a                           = rmm_next::import_pointer(pool, exported);
  imported_pointer b                           = rmm_next::import_pointer(pool, exported);
  imported_pointer c                           = rmm_next::import_pointer(pool, exported);
  void* const address                          = a.get();

  imported_pointer moved{std::move(a)};
  EXPECT_EQ(a.get(), nullptr);  // NOLINT(bugprone-use-after-move): documented as empty
  EXPECT_FALSE(a.pool());       // NOLINT(bugprone-use-after-move)
  a.reset();                    // NOLINT(bugprone-use-after-move): a moved-from reset frees nothing
  EXPECT_EQ(moved.get(), address);
  EXPECT_EQ(ipc().free_calls, 0);

  b = std::move(moved);             // b gives up its own share: two of three remain
  EXPECT_EQ(moved.get(), nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(b.get(), address);
  EXPECT_EQ(ipc().free_calls, 0);

  auto& same = b;
  b          = std::move(same);  // self-move keeps the share
  EXPECT_EQ(b.get(), address);

  c.reset();
  EXPECT_EQ(ipc().free_calls, 0);
  EXPECT_TRUE(fake::is_mapped(address));
  b.reset();
  EXPECT_EQ(ipc().free_calls, 1);
  EXPECT_EQ(ipc().imported_frees, 1);
  {
    imported_pointer const from_the_moved_from{std::move(moved)};
  }  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(ipc().free_calls, 1);
}

TEST_F(IpcSharedImports, ImportsOnManyThreadsAtOnceNeverFreeAMappingInUse)
{
  rmm_next::imported_pool const pool = import_some_pool();
  std::array<rmm_next::pool_pointer_export, 3> const exports{
    export_allocation(1), export_allocation(2), export_allocation(3)};
  constexpr int threads    = 8;
  constexpr int iterations = 300;
  std::atomic<int> unmapped_while_held{0};
  std::atomic<int> empty_imports{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < iterations; ++i) {
        // Each thread holds two imports at once, of one allocation or of two, and drops them in
        // either order while the others import the same allocations.
        auto const& one         = exports[static_cast<std::size_t>((t + i) % 3)];
        auto const& two         = exports[static_cast<std::size_t>((t * i) % 3)];
        imported_pointer first  = rmm_next::import_pointer(pool, one);
        imported_pointer second = rmm_next::import_pointer(pool, two);
        if (first.get() == nullptr || second.get() == nullptr) { ++empty_imports; }
        if (!fake::is_mapped(first.get()) || !fake::is_mapped(second.get())) {
          ++unmapped_while_held;
        }
        if (i % 2 == 0) { first.reset(); }  // else destroyed after `second`
        if (!fake::is_mapped(second.get())) { ++unmapped_while_held; }
        second.reset();
      }
    });
  }
  for (auto& w : workers) {
    w.join();
  }
  fake::ipc_driver const seen = ipc();
  EXPECT_EQ(empty_imports.load(), 0);
  EXPECT_EQ(unmapped_while_held.load(), 0) << "a mapping was freed while an import still held it";
  EXPECT_EQ(seen.failed_frees, 0) << "a mapping was freed twice";
  EXPECT_EQ(seen.pointers_imported, 2 * threads * iterations);
  EXPECT_EQ(seen.imported_frees, seen.mappings_made) << "every mapping made is freed once";
  EXPECT_TRUE(seen.mapped.empty());
}

/**
 * @brief An import of `exported` on a thread of its own, held inside the fake driver's
 * cudaMemPoolImportPointer (once the driver has chosen the address) until `finish()`.
 */
class import_in_flight {
 public:
  import_in_flight(rmm_next::imported_pool const& pool, rmm_next::pool_pointer_export exported)
  {
    {
      std::lock_guard const lock{fake::ipc_mutex()};
      fake::fake().ipc.inside_import = [this] {
        std::unique_lock held{mutex_};
        in_import_ = true;
        cv_.notify_all();
        cv_.wait(held, [this] { return go_on_; });
      };
    }
    thread_ = std::thread{
      [this, pool, exported] { imported_.emplace(rmm_next::import_pointer(pool, exported)); }};
    std::unique_lock held{mutex_};
    cv_.wait(held, [this] { return in_import_; });
  }
  import_in_flight(import_in_flight const&)            = delete;
  import_in_flight& operator=(import_in_flight const&) = delete;
  ~import_in_flight() { (void)finish(); }

  /** @brief Lets the import return; what it imported (empty if it threw). */
  std::optional<imported_pointer> finish()
  {
    if (!thread_.joinable()) { return std::move(imported_); }
    {
      std::lock_guard const lock{mutex_};
      go_on_ = true;
      cv_.notify_all();
    }
    thread_.join();
    std::lock_guard const lock{fake::ipc_mutex()};
    fake::fake().ipc.inside_import = nullptr;
    return std::move(imported_);
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool in_import_{false};
  bool go_on_{false};
  std::optional<imported_pointer> imported_;
  std::thread thread_;
};

TEST_F(IpcSharedImports, TheLastReleaseWaitsForAnImportOfTheSameAllocationInFlight)
{
  rmm_next::imported_pool const pool           = import_some_pool();
  rmm_next::pool_pointer_export const exported = export_allocation(1);
  std::optional<imported_pointer> last{rmm_next::import_pointer(pool, exported)};
  void* const address = last->get();

  import_in_flight next{pool, exported};  // the driver hands out the mapped address again
  std::atomic<bool> released{false};
  std::thread releaser{[&] {
    last.reset();
    released = true;
  }};
  // Freed now, the mapping would be gone under the import that the driver is handing out.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(released.load()) << "the last share was freed while an import of it was in flight";
  EXPECT_EQ(ipc().free_calls, 0);
  std::optional<imported_pointer> imported = next.finish();
  releaser.join();
  ASSERT_TRUE(imported.has_value());
  EXPECT_EQ(imported->get(), address);
  EXPECT_TRUE(fake::is_mapped(address)) << "the new import's mapping was freed";
  EXPECT_EQ(ipc().free_calls, 0);
  imported.reset();
  EXPECT_EQ(ipc().imported_frees, 1);
  EXPECT_EQ(ipc().failed_frees, 0);
}

TEST_F(IpcSharedImports, ReleasingASharedImportIsRefusedAndChangesNothing)
{
  rmm_next::imported_pool const pool           = import_some_pool();
  rmm_next::pool_pointer_export const exported = export_allocation(1);
  imported_pointer a                           = rmm_next::import_pointer(pool, exported);
  std::optional<imported_pointer> b{rmm_next::import_pointer(pool, exported)};
  void* const address = a.get();
  try {
    (void)a.release();
    ADD_FAILURE() << "released a mapping another imported_pointer shares";
  } catch (rmm_next::logic_error const& e) {
    std::string const what = e.what();
    EXPECT_EQ(what.rfind("rmm_next::imported_pointer::release: ", 0), 0U) << what;
    EXPECT_NE(what.find("1 other imported_pointer"), std::string::npos) << what;
    EXPECT_NE(what.find("reset()"), std::string::npos) << what;
  }
  EXPECT_EQ(a.get(), address) << "the refused release emptied the object";
  b.reset();
  EXPECT_EQ(ipc().free_calls, 0);

  // The sole import may be released: its free is the caller's from then on.
  void* const released = a.release();
  EXPECT_EQ(released, address);
  EXPECT_EQ(a.get(), nullptr);
  a.reset();
  EXPECT_EQ(ipc().free_calls, 0);
  EXPECT_EQ(cudaFree(released), cudaSuccess);
  EXPECT_EQ(ipc().imported_frees, 1);
  EXPECT_EQ(ipc().failed_frees, 0);
}

TEST_F(IpcSharedImports, AFailedImportLeavesTheOthersSharesAsTheyWere)
{
  rmm_next::imported_pool const pool           = import_some_pool();
  rmm_next::pool_pointer_export const exported = export_allocation(1);
  std::optional<imported_pointer> held{rmm_next::import_pointer(pool, exported)};
  fake::fake().fail_next["cudaMemPoolImportPointer"] = cudaErrorInvalidValue;
  EXPECT_THROW((void)rmm_next::import_pointer(pool, exported), rmm_next::cuda_error);
  held.reset();
  EXPECT_EQ(ipc().imported_frees, 1) << "the failed import was counted as a share";
  EXPECT_EQ(ipc().failed_frees, 0);
}

TEST_F(IpcSharedImports, ImportsAndTheirFreeRunInRelaxedCaptureMode)
{
  {
    rmm_next::imported_pool const pool           = import_some_pool();
    rmm_next::pool_pointer_export const exported = export_allocation(1);
    imported_pointer const a                     = rmm_next::import_pointer(pool, exported);
    imported_pointer const b                     = rmm_next::import_pointer(pool, exported);
  }
  int seen = 0;
  for (auto const& [call, mode] : fake::fake().query_modes) {
    if (call == "cudaMemPoolImportFromShareableHandle" || call == "cudaMemPoolExportPointer" ||
        call == "cudaMemPoolImportPointer" || call == "cudaFree") {
      ++seen;
      EXPECT_EQ(mode, cudaStreamCaptureModeRelaxed) << call << " ran in the caller's mode";
    }
  }
  EXPECT_EQ(seen, 5);  // one pool import, one export, two imports, one free
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
  EXPECT_EQ(mode, cudaStreamCaptureModeGlobal) << "the thread did not get its own mode back";
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
}

TEST_F(IpcSharedImports, AForkedChildFreesNothingAndIsRefusedNewImportsWithATypedError)
{
  rmm_next::imported_pool const pool           = import_some_pool();
  rmm_next::pool_pointer_export const exported = export_allocation(1);
  std::optional<imported_pointer> a{rmm_next::import_pointer(pool, exported)};
  std::optional<imported_pointer> b{rmm_next::import_pointer(pool, exported)};
  void* const address = a->get();

  // Another thread is inside an import, with whatever lock that takes, when the process forks.
  import_in_flight in_flight{pool, exported};
  std::string const child                  = rmm_next::test::run_in_forked_child([&] {
    int const calls_before = fake::fake().ipc.free_calls;
    int code               = 0;
    try {
      (void)rmm_next::import_pointer(pool, exported);
      code |= 1;
    } catch (rmm_next::cuda_error const& e) {
      std::string const what = e.what();
      if (e.code() != cudaErrorInitializationError ||
          what.rfind("rmm_next::import_pointer: ", 0) != 0 ||
          what.find("forked") == std::string::npos) {
        code |= 2;
      }
    }
    a.reset();
    b.reset();
    if (fake::fake().ipc.free_calls != calls_before) { code |= 4; }
    return code;
  });
  std::optional<imported_pointer> imported = in_flight.finish();
  EXPECT_EQ(child, "") << "1: the child imported; 2: not the typed error naming the fork; "
                          "4: the child freed an import; signal 14: it hung on a lock";

  // The parent's imports are as they were: one mapping, freed once, by the last of three.
  ASSERT_TRUE(imported.has_value());
  EXPECT_EQ(imported->get(), address);
  a.reset();
  b.reset();
  EXPECT_TRUE(fake::is_mapped(address));
  EXPECT_EQ(ipc().free_calls, 0);
  imported->reset();
  EXPECT_EQ(ipc().imported_frees, 1);
  EXPECT_EQ(ipc().failed_frees, 0);
}

}  // namespace
