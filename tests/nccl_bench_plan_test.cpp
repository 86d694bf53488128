/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// benchmarks/support/nccl_bench_plan.hpp: what nccl_allreduce_bench runs and how it reports it.

#include "support/nccl_bench_plan.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace rmm_next_bench;
constexpr std::size_t MiB = std::size_t{1} << 20;

TEST(NcclBenchPlan, TheDefaultSweepIsOneMiBToOneGiBOverThreeKinds)
{
  nccl_bench_options const o           = parse_nccl_bench_options({});
  std::vector<std::size_t> const sizes = nccl_bench_sizes(o.min_bytes, o.max_bytes);
  ASSERT_EQ(sizes.size(), 11U);
  EXPECT_EQ(sizes.front(), MiB);
  EXPECT_EQ(sizes[1], 2 * MiB);
  EXPECT_EQ(sizes.back(), 1024 * MiB);
  EXPECT_EQ(o.kinds, (std::vector<std::string>{"cudaMalloc", "ncclMemAlloc", "vmm_resource"}));
  EXPECT_EQ(o.rank, -1);  // the launcher
  EXPECT_EQ(o.gpus, 0);
}

TEST(NcclBenchPlan, AMaximumThatIsNoDoublingIsStillMeasured)
{
  EXPECT_EQ(nccl_bench_sizes(MiB, 3 * MiB), (std::vector<std::size_t>{MiB, 2 * MiB, 3 * MiB}));
  EXPECT_EQ(nccl_bench_sizes(4 * MiB, 4 * MiB), (std::vector<std::size_t>{4 * MiB}));
}

TEST(NcclBenchPlan, BusBandwidthIsAlgorithmBandwidthTimesTwoNMinusOneOverN)
{
  nccl_bench_row r;
  r.bytes   = 1000 * MiB;
  r.seconds = 0.5;
  r.ranks   = 2;
  EXPECT_DOUBLE_EQ(r.algbw(), 2000.0 * MiB);
  EXPECT_DOUBLE_EQ(r.busbw(), 2000.0 * MiB);  // 2 (2 - 1) / 2 = 1
  r.ranks = 8;
  EXPECT_DOUBLE_EQ(r.busbw(), 2000.0 * MiB * 14 / 8);
  r.ranks = 1;
  EXPECT_DOUBLE_EQ(r.busbw(), 0.0);  // nothing crosses a link
  r.seconds = 0;
  EXPECT_DOUBLE_EQ(r.algbw(), 0.0);
}

TEST(NcclBenchPlan, RowsAreWrittenInTheHeadersColumns)
{
  nccl_bench_row r{"vmm_resource", 4 * MiB, 2, 50, 1e-4, 0, true};
  EXPECT_EQ(csv_header(),
            "kind,bytes,ranks,iterations,time_us,algbw_GBps,busbw_GBps,wrong,registered\n");
  EXPECT_EQ(csv_line(r), "vmm_resource,4194304,2,50,100.000,41.943,41.943,0,1\n");
  EXPECT_EQ(json_object(r),
            "{\"kind\": \"vmm_resource\", \"bytes\": 4194304, \"ranks\": 2, \"iterations\": 50, "
            "\"time_us\": 100.000, \"algbw_GBps\": 41.943, \"busbw_GBps\": 41.943, \"wrong\": 0, "
            "\"registered\": true}");
}

TEST(NcclBenchPlan, TheCommandLineIsReadAndCheckedWithWhatToDo)
{
  nccl_bench_options const o = parse_nccl_bench_options({"--out",
                                                         "/tmp/r",
                                                         "--gpus",
                                                         "2",
                                                         "--min-bytes",
                                                         "64K",
                                                         "--max-bytes",
                                                         "8MiB",
                                                         "--iterations",
                                                         "3",
                                                         "--warmup",
                                                         "1",
                                                         "--kinds",
                                                         "vmm_resource,cudaMalloc"});
  EXPECT_EQ(o.out_dir, "/tmp/r");
  EXPECT_EQ(o.gpus, 2);
  EXPECT_EQ(o.min_bytes, 64U << 10);
  EXPECT_EQ(o.max_bytes, 8 * MiB);
  EXPECT_EQ(o.iterations, 3);
  EXPECT_EQ(o.warmup, 1);
  EXPECT_EQ(o.kinds, (std::vector<std::string>{"vmm_resource", "cudaMalloc"}));
  EXPECT_EQ(parse_bytes("1G"), std::size_t{1} << 30);
  EXPECT_EQ(parse_bytes("4096"), 4096U);

  auto message = [](std::vector<std::string> const& args) -> std::string {
    try {
      (void)parse_nccl_bench_options(args);
    } catch (std::invalid_argument const& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(message({"--kinds", "hostMalloc"}),
            "nccl_allreduce_bench: unknown buffer kind 'hostMalloc'; pass a comma-separated list "
            "of cudaMalloc, ncclMemAlloc, vmm_resource");
  EXPECT_EQ(message({"--max-bytes", "1T"}),
            "nccl_allreduce_bench: '1T' is not a byte count; write e.g. 1M, 64MiB or 1G");
  EXPECT_EQ(message({"--gpus", "-1"}),
            "nccl_allreduce_bench: --gpus -1 is not a count; pass a whole number >= 0");
  EXPECT_EQ(message({"--min-bytes", "2M", "--max-bytes", "1M"}),
            "nccl_allreduce_bench: --min-bytes exceeds --max-bytes");
  EXPECT_EQ(message({"--out"}), "nccl_allreduce_bench: --out needs a value");
  EXPECT_NE(message({"--rank", "1", "--ranks", "1", "--id-file", "x"}).find("--rank needs"),
            std::string::npos);
  EXPECT_NE(message({"--bogus"}).find("unknown argument '--bogus'"), std::string::npos);
}

TEST(NcclBenchPlan, LargerSizesRunFewerIterationsUnlessFixed)
{
  EXPECT_EQ(iterations_for(MiB, 0), 50);
  EXPECT_EQ(iterations_for(64 * MiB, 0), 20);
  EXPECT_EQ(iterations_for(1024 * MiB, 0), 10);
  EXPECT_EQ(iterations_for(1024 * MiB, 7), 7);
}

}  // namespace
