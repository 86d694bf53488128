/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#include <rmm_next/detail/pointer_registry.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using rmm_next::detail::pointer_registry;

struct record {
  std::size_t bytes{};
  int tag{};
  std::vector<int> users;
};

void* at(std::uintptr_t address) { return reinterpret_cast<void*>(address); }  // NOLINT

TEST(PointerRegistry, InsertTakeAndReplace)
{
  pointer_registry<record> r;
  EXPECT_FALSE(r.insert(at(0x1000), {.bytes = 256, .tag = 1, .users = {7}}).has_value());
  EXPECT_EQ(r.size(), 1U);
  EXPECT_EQ(r.bytes(), 256U);

  // Handed out again without a free: the new record replaces the old, which comes back.
  std::optional<record> const replaced =
    r.insert(at(0x1000), {.bytes = 512, .tag = 2, .users = {}});
  ASSERT_TRUE(replaced.has_value());
  EXPECT_EQ(replaced->tag, 1);
  EXPECT_EQ(replaced->users, std::vector<int>{7});
  EXPECT_EQ(r.size(), 1U);
  EXPECT_EQ(r.bytes(), 512U);

  // A refused take leaves the pointer live.
  EXPECT_FALSE(r.take_if(at(0x1000), [](record const& x) { return x.tag == 1; }).has_value());
  EXPECT_EQ(r.size(), 1U);
  EXPECT_FALSE(r.take(at(0x1100)).has_value());  // never handed out
  std::optional<record> const taken = r.take(at(0x1000));
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->tag, 2);
  EXPECT_FALSE(r.take(at(0x1000)).has_value());  // freed already
  EXPECT_FALSE(r.erase(at(0x1000)));
  EXPECT_EQ(r.size(), 0U);
  EXPECT_EQ(r.bytes(), 0U);
}

TEST(PointerRegistry, UpdateChangesTheRecordOfLivePointersOnly)
{
  pointer_registry<record> r;
  (void)r.insert(at(0x2000), {.bytes = 256, .tag = 0, .users = {}});
  EXPECT_TRUE(r.update(at(0x2000), [](record& x) { x.users.push_back(3); }));
  bool called = false;
  EXPECT_FALSE(r.update(at(0x2100), [&](record&) { called = true; }));
  EXPECT_FALSE(called);
  EXPECT_EQ(r.take(at(0x2000))->users, std::vector<int>{3});
}

/**
 * Random inserts, replacements, takes, erases and updates against a std::map, over addresses close
 * together (long probe runs in one shard) and far apart, tens of thousands live at the peak so that
 * every shard's table grows many times and shifts entries back on erase.
 */
TEST(PointerRegistry, AgreesWithAMapUnderRandomOperations)
{
  unsigned const seed = std::getenv("RMM_NEXT_MODEL_SEED") != nullptr
                          ? static_cast<unsigned>(std::stoul(std::getenv("RMM_NEXT_MODEL_SEED")))
                          : std::random_device{}();
  std::cout << "seed " << seed << " (RMM_NEXT_MODEL_SEED repeats it)\n";
  std::mt19937_64 rng{seed};
  pointer_registry<record> r;
  std::map<std::uintptr_t, record> model;
  std::size_t model_bytes = 0;
  auto const some_address = [&] {
    std::uintptr_t const base = (rng() % 2 == 0) ? 0x7f0000000000 : 0x300000000;
    std::uintptr_t const step = (rng() % 2 == 0) ? 256 : 2 << 20;
    return base + step * (1 + rng() % 40000);
  };
  for (int i = 0; i < 400000; ++i) {
    std::uintptr_t const a = some_address();
    auto const it          = model.find(a);
    switch (rng() % 8) {
      case 0:
      case 1:
      case 2: {
        record x{.bytes = 256 * (1 + rng() % 64), .tag = i, .users = {}};
        std::optional<record> const replaced = r.insert(at(a), x);
        ASSERT_EQ(replaced.has_value(), it != model.end()) << "seed " << seed << " step " << i;
        if (it != model.end()) {
          ASSERT_EQ(replaced->tag, it->second.tag);
          model_bytes -= it->second.bytes;
        }
        model_bytes += x.bytes;
        model[a] = x;
        break;
      }
      case 3:
      case 4: {
        std::optional<record> const taken = r.take(at(a));
        ASSERT_EQ(taken.has_value(), it != model.end()) << "seed " << seed << " step " << i;
        if (taken) {
          ASSERT_EQ(taken->tag, it->second.tag);
          ASSERT_EQ(taken->users, it->second.users);
          model_bytes -= it->second.bytes;
          model.erase(it);
        }
        break;
      }
      case 5: {
        bool const erased = r.erase(at(a));
        ASSERT_EQ(erased, it != model.end()) << "seed " << seed << " step " << i;
        if (erased) {
          model_bytes -= it->second.bytes;
          model.erase(it);
        }
        break;
      }
      default: {
        int const user  = static_cast<int>(rng() % 100);
        bool const live = r.update(at(a), [&](record& x) { x.users.push_back(user); });
        ASSERT_EQ(live, it != model.end()) << "seed " << seed << " step " << i;
        if (live) { it->second.users.push_back(user); }
      }
    }
    if (i % 20000 == 0) {
      ASSERT_EQ(r.size(), model.size()) << "seed " << seed;
      ASSERT_EQ(r.bytes(), model_bytes) << "seed " << seed;
    }
  }
  std::map<std::uintptr_t, record> seen;
  r.for_each([&](void* p, record const& x) {
    EXPECT_TRUE(seen.emplace(reinterpret_cast<std::uintptr_t>(p), x).second);  // NOLINT
  });
  ASSERT_EQ(seen.size(), model.size()) << "seed " << seed;
  for (auto const& [a, x] : model) {
    ASSERT_EQ(seen.at(a).tag, x.tag) << "seed " << seed;
    ASSERT_EQ(seen.at(a).users, x.users) << "seed " << seed;
  }
  EXPECT_EQ(r.bytes(), model_bytes);
}

TEST(PointerRegistry, ThreadsOfDisjointPointersKeepEveryRecord)
{
  pointer_registry<record> r;
  constexpr int threads = 4;
  constexpr int each    = 20000;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&r, t] {
      for (int i = 0; i < each; ++i) {
        std::uintptr_t const a = 0x10000000 + (static_cast<std::uintptr_t>(i * threads + t) << 8);
        (void)r.insert(at(a), {.bytes = 256, .tag = t, .users = {}});
        if (i % 2 == 1) { (void)r.take(at(a - (static_cast<std::uintptr_t>(threads) << 8))); }
      }
    });
  }
  for (auto& th : pool) {
    th.join();
  }
  EXPECT_EQ(r.size(), static_cast<std::size_t>(threads * each / 2));
  EXPECT_EQ(r.bytes(), 256U * threads * each / 2);
  int wrong = 0;
  r.for_each([&](void* p, record const& x) {
    auto const i = (reinterpret_cast<std::uintptr_t>(p) - 0x10000000) >> 8;  // NOLINT
    if (static_cast<int>(i % threads) != x.tag || (i / threads) % 2 != 1) { ++wrong; }
  });
  EXPECT_EQ(wrong, 0);
}

}  // namespace
