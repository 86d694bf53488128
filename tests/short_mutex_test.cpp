/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// The segment cache's lock: one holder at a time under contention, try_lock only when free, and a
// thread that waits for a long holder sleeps instead of spinning.

#include <rmm_next/detail/short_mutex.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <mutex>
#include <thread>
#include <vector>

namespace {

using rmm_next::detail::short_mutex;

TEST(ShortMutex, OneHolderAtATimeUnderContention)
{
  short_mutex m;
  long counter = 0;  // not atomic: the lock alone orders it
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  constexpr int threads = 6;
  constexpr int rounds  = 20000;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < rounds; ++i) {
        std::lock_guard const lock{m};
        if (inside.fetch_add(1) != 0) { overlaps.fetch_add(1); }
        ++counter;
        // Now and then a long hold, so that waiters go past spinning and sleep.
        if ((i + t) % 4096 == 0) { std::this_thread::sleep_for(std::chrono::microseconds{200}); }
        inside.fetch_sub(1);
      }
    });
  }
  for (auto& th : pool) {
    th.join();
  }
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(counter, long{threads} * rounds);
}

TEST(ShortMutex, TryLockTakesItOnlyWhenFree)
{
  short_mutex m;
  ASSERT_TRUE(m.try_lock());
  bool taken_elsewhere = true;
  std::thread other{[&] { taken_elsewhere = m.try_lock(); }};
  other.join();
  EXPECT_FALSE(taken_elsewhere);
  m.unlock();
  std::thread again{[&] {
    taken_elsewhere = m.try_lock();
    if (taken_elsewhere) { m.unlock(); }
  }};
  again.join();
  EXPECT_TRUE(taken_elsewhere);
}

double thread_cpu_seconds()
{
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

TEST(ShortMutex, AThreadWaitingForALongHolderSleeps)
{
  short_mutex m;
  m.lock();
  std::atomic<bool> got{false};
  double waiter_cpu = 0;
  std::thread waiter{[&] {
    double const before = thread_cpu_seconds();
    m.lock();
    waiter_cpu = thread_cpu_seconds() - before;
    got.store(true);
    m.unlock();
  }};
  auto const hold = std::chrono::milliseconds{300};
  std::this_thread::sleep_for(hold);
  EXPECT_FALSE(got.load()) << "the lock was taken while held";
  m.unlock();
  waiter.join();
  EXPECT_TRUE(got.load());
  // A spinning waiter would have used about the whole hold; a sleeping one uses a few slices'
  // wake-ups.
  EXPECT_LT(waiter_cpu, 0.1 * std::chrono::duration<double>(hold).count())
    << "the waiting thread used " << waiter_cpu << " s of CPU during a 0.3 s hold";
}

TEST(ShortMutex, ReleasedWhileAThreadSleepsItIsTakenByIt)
{
  short_mutex m;
  for (int round = 0; round < 50; ++round) {
    m.lock();
    std::atomic<bool> got{false};
    std::thread waiter{[&] {
      m.lock();
      got.store(true);
      m.unlock();
    }};
    std::this_thread::sleep_for(std::chrono::milliseconds{2});  // past the spinning
    m.unlock();
    waiter.join();  // hangs if the sleeper is never woken, nor wakes by itself
    EXPECT_TRUE(got.load());
  }
}

}  // namespace
