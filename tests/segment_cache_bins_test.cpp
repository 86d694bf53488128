/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// The segment cache's free bins and live-block table against plain std containers, from a random
// seed (printed; RMM_NEXT_MODEL_SEED picks it): best_fit answers as a set ordered by size and
// address would, through listings, removals and blocks resized in place, and the table finds every
// live block through growth and removals.

#include <rmm_next/detail/segment_cache.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

namespace detail = rmm_next::detail;
using detail::cache_block;

constexpr std::size_t granule = detail::segment_cache_granule;
constexpr std::size_t MiB     = std::size_t{1} << 20;

std::uint64_t test_seed()
{
  char const* chosen = std::getenv("RMM_NEXT_MODEL_SEED");
  std::uint64_t const seed =
    chosen != nullptr ? std::strtoull(chosen, nullptr, 10) : std::random_device{}();
  std::printf("segment cache bins: seed %llu (RMM_NEXT_MODEL_SEED)\n",
              static_cast<unsigned long long>(seed));
  return seed;
}

TEST(SegmentCacheBins, HigherBinsHoldOnlyLargerBlocks)
{
  std::size_t last = 0;
  for (std::size_t size = granule; size <= 64 * MiB; size += granule) {
    std::size_t const bin = detail::free_bin_of(size);
    ASSERT_GE(bin, last) << size;
    if (size < MiB) { ASSERT_EQ(bin, size / granule); }  // one size a bin below 1 MiB
    last = bin;
  }
  EXPECT_EQ(detail::free_bin_of(MiB), detail::exact_free_bins);
  EXPECT_EQ(detail::free_bin_of(2 * MiB), detail::exact_free_bins + 16);
  EXPECT_EQ(detail::free_bin_of(2 * MiB - granule), detail::exact_free_bins + 15);
  // The largest size a block can have still has a bin.
  std::size_t const largest = ~(granule - 1);
  EXPECT_EQ(detail::free_bin_of(largest), detail::exact_free_bins + (54 - 11) * 16 + 15);
}

/** @brief Random listings and lookups in `bins`, each checked against an ordered set. */
void check_against_a_sorted_set(detail::free_bins& bins,
                                std::size_t smallest,
                                std::size_t largest,
                                std::uint64_t seed)
{
  std::mt19937_64 rng{seed};
  std::vector<std::unique_ptr<cache_block>> listed;
  std::set<std::pair<std::size_t, std::uintptr_t>> model;
  std::uintptr_t next_address = std::uintptr_t{1} << 40;
  // Sizes crowd a few values, so that equal sizes and near misses are common.
  std::vector<std::size_t> popular;
  for (int i = 0; i < 24; ++i) {
    popular.push_back(smallest + (rng() % ((largest - smallest) / granule + 1)) * granule);
  }
  auto size = [&] {
    return rng() % 2 != 0 ? popular[rng() % popular.size()]
                          : smallest + (rng() % ((largest - smallest) / granule + 1)) * granule;
  };
  for (int step = 0; step < 200000; ++step) {
    unsigned const what = rng() % 9;
    if (what < 3 || listed.empty()) {
      auto b     = std::make_unique<cache_block>();
      b->size    = size();
      b->address = next_address;
      next_address += b->size;
      bins.insert(*b);
      model.emplace(b->size, b->address);
      listed.push_back(std::move(b));
    } else if (what < 5) {
      std::size_t const i = rng() % listed.size();
      bins.erase(*listed[i]);
      model.erase({listed[i]->size, listed[i]->address});
      listed[i] = std::move(listed.back());
      listed.pop_back();
    } else if (what < 6) {
      // A listed block grows or shrinks in place (a split or a merge), and moves bins if need be.
      cache_block& b = *listed[rng() % listed.size()];
      model.erase({b.size, b.address});
      b.size    = size();
      b.address = next_address;
      next_address += b.size;
      bins.resized(b);
      model.emplace(b.size, b.address);
    } else {
      std::size_t const want = size();
      cache_block const* got = bins.best_fit(want);
      auto const expected    = model.lower_bound({want, 0});
      if (expected == model.end()) {
        ASSERT_EQ(got, nullptr) << "seed " << seed << " step " << step << " size " << want;
        continue;
      }
      ASSERT_NE(got, nullptr) << "seed " << seed << " step " << step << " size " << want;
      ASSERT_EQ(got->size, expected->first) << "seed " << seed << " step " << step;
      // Among equal sizes: any in a bin of one size (the last listed), else the lowest address.
      if (got->size >= MiB) { ASSERT_EQ(got->address, expected->second) << "seed " << seed; }
      ASSERT_TRUE(model.contains({got->size, got->address})) << "seed " << seed;
    }
  }
  for (auto& b : listed) {
    bins.erase(*b);
  }
  EXPECT_EQ(bins.best_fit(granule), nullptr);
}

TEST(SegmentCacheBins, BestFitIsTheSmallestBlockThatFitsAsASortedSetWouldFindIt)
{
  std::uint64_t const seed = test_seed();
  auto small               = detail::small_free_bins();
  check_against_a_sorted_set(small, granule, detail::small_segment_bytes, seed);
  auto large = detail::large_free_bins();
  check_against_a_sorted_set(large, MiB + granule, 64 * MiB, seed + 1);
}

TEST(SegmentCacheBins, TheLiveTableFindsEveryLiveBlockThroughGrowthAndRemovals)
{
  std::uint64_t const seed = test_seed();
  std::mt19937_64 rng{seed};
  detail::live_block_table table;
  std::unordered_map<std::uintptr_t, std::unique_ptr<cache_block>> model;
  EXPECT_EQ(table.find(4096), detail::live_block_table::npos);
  for (int step = 0; step < 300000; ++step) {
    // Addresses in a narrow range, granule apart: neighbours collide in the table's runs.
    std::uintptr_t const address = (std::uintptr_t{1} << 40) + (rng() % 20000) * granule;
    auto const it                = model.find(address);
    std::size_t const slot       = table.find(address);
    if (it == model.end()) {
      ASSERT_EQ(slot, detail::live_block_table::npos) << "seed " << seed << " step " << step;
      // Grow towards 10,000 live blocks, then hover there.
      if (model.size() < 10000 || rng() % 2 == 0) {
        auto b     = std::make_unique<cache_block>();
        b->address = address;
        table.reserve(table.size() + 1);
        table.insert({b->address, b.get()});
        model.emplace(address, std::move(b));
      }
    } else {
      ASSERT_NE(slot, detail::live_block_table::npos) << "seed " << seed << " step " << step;
      ASSERT_EQ(table.at(slot).block, it->second.get()) << "seed " << seed << " step " << step;
      if (rng() % 2 == 0) {
        table.erase(slot);
        model.erase(it);
      }
    }
    ASSERT_EQ(table.size(), model.size());
  }
  for (auto const& [address, block] : model) {
    std::size_t const slot = table.find(address);
    ASSERT_NE(slot, detail::live_block_table::npos) << "seed " << seed;
    EXPECT_EQ(table.at(slot).address, address);
    EXPECT_EQ(table.at(slot).block, block.get());
  }
}

}  // namespace
