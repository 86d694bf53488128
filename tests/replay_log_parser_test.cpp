/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// CPU tests of benchmarks/replay/log_parser.hpp: every field of a log written by hand in the
// format of RMM's logging_resource_adaptor (tests/data/replay_sample.csv), malformed lines
// reported with their line number, frees of unknown pointers, the per-thread event lists, the
// cross-thread waits of both orders, and a replay of the plan by real threads through
// event_gate that must run the events in the order the plan promises.

#include "replay/log_parser.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace rmm_next_bench::replay {
namespace {

std::vector<event> parse_text(std::string const& text)
{
  std::istringstream in{text};
  return parse_log(in, "test.csv");
}

std::string const header = std::string{log_header} + "\n";

constexpr std::uint64_t time_of(std::uint64_t h, std::uint64_t m, std::uint64_t s, std::uint64_t us)
{
  return ((h * 60 + m) * 60 + s) * 1000000 + us;
}

constexpr std::uintptr_t user_stream = 0x55d0c0a0b0c0;

TEST(ReplayLogParser, ParsesEveryFieldOfTheSample)
{
  auto const events = parse_log_file(RMM_NEXT_REPLAY_SAMPLE);
  ASSERT_EQ(events.size(), 10u);
  struct expected {
    std::uint64_t thread;
    std::uint64_t time_us;
    action act;
    std::uintptr_t pointer;
    std::size_t size;
    std::uintptr_t stream;
    std::size_t line;
  };
  expected const want[] = {
    {1001, time_of(10, 15, 30, 1), action::allocate, 0x7f0000000000, 1024, 0, 2},
    {1001, time_of(10, 15, 30, 20), action::allocate, 0x7f0000000400, 4096, user_stream, 3},
    {1002, time_of(10, 15, 30, 31), action::allocate, 0x7f0000002000, 256, 0x2, 4},
    {1002, time_of(10, 15, 30, 42), action::free, 0x7f0000000000, 1024, user_stream, 5},
    {1001, time_of(10, 15, 30, 50), action::allocate_failure, 0, 1073741824, 0x1, 6},
    {1002, time_of(10, 15, 30, 61), action::free, 0x7f0000009000, 512, 0x2, 7},
    {1001, time_of(10, 15, 30, 70), action::free, 0x7f0000000400, 4096, user_stream, 8},
    {1003, time_of(10, 15, 31, 250000), action::allocate, 0x7f0000000000, 2048, 0, 9},
    {1003, time_of(10, 15, 31, 250100), action::free, 0x7f0000002000, 256, 0x2, 10},
    {1001, time_of(23, 59, 59, 999999), action::allocate, 0x7f0000010000, 512, user_stream, 11},
  };
  for (std::size_t i = 0; i < events.size(); ++i) {
    SCOPED_TRACE("event " + std::to_string(i));
    EXPECT_EQ(events[i].thread, want[i].thread);
    EXPECT_EQ(events[i].time_us, want[i].time_us);
    EXPECT_EQ(events[i].act, want[i].act);
    EXPECT_EQ(events[i].pointer, want[i].pointer);
    EXPECT_EQ(events[i].size, want[i].size);
    EXPECT_EQ(events[i].stream, want[i].stream);
    EXPECT_EQ(events[i].line, want[i].line);
  }
}

TEST(ReplayLogParser, AcceptsWhatRmmsRulesAccept)
{
  // CRLF, empty lines, a repeated header, a time with ':' before the fraction (RMM's parse_time
  // takes any separator), fewer fraction digits, uppercase hex, hex without its prefix.
  auto const events = parse_text(header + "7,01:02:03:5,allocate,0X1A,16,0XFF\r\n\n" + header +
                                 "8,01:02:03.123,free,1a,16,ff\n");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].time_us, time_of(1, 2, 3, 500000));
  EXPECT_EQ(events[0].pointer, 0x1au);
  EXPECT_EQ(events[0].stream, 0xffu);
  EXPECT_EQ(events[0].line, 2u);
  EXPECT_EQ(events[1].time_us, time_of(1, 2, 3, 123000));
  EXPECT_EQ(events[1].pointer, 0x1au);
  EXPECT_EQ(events[1].line, 5u);
  // A header alone: an empty log.
  EXPECT_TRUE(parse_text(header).empty());
}

/** @brief The parse_error of `text`, with its line and message checked. */
void expect_error(std::string const& text, std::size_t line, std::string const& fragment)
{
  SCOPED_TRACE(text);
  try {
    (void)parse_text(text);
    ADD_FAILURE() << "no parse_error";
  } catch (parse_error const& e) {
    EXPECT_EQ(e.line(), line);
    std::string const what = e.what();
    EXPECT_NE(what.find("replay log test.csv, line " + std::to_string(line) + ": "),
              std::string::npos)
      << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << what;
  }
}

TEST(ReplayLogParser, MalformedLinesNameTheirLine)
{
  std::string const good = "1,00:00:00.000001,allocate,0x100,8,0\n";
  expect_error("", 0, "no header line: the log is empty");
  expect_error("Thread,Time,Action\n" + good, 1, "expected the header");
  expect_error(header + good + "1,00:00:00.000002,allocate,0x100,8\n", 3, "5 fields, expected 6");
  expect_error(header + "1,00:00:00.000002,free,0x100,8,0,9\n", 2, "7 fields, expected 6");
  expect_error(header + good + "x1,00:00:00.000002,free,0x100,8,0\n", 3, "bad Thread \"x1\"");
  expect_error(header + "-1,00:00:00.000002,free,0x100,8,0\n", 2, "bad Thread \"-1\"");
  expect_error(header + "1,10:15,free,0x100,8,0\n", 2, "bad Time \"10:15\"");
  expect_error(header + "1,25:00:00.000000,free,0x100,8,0\n", 2, "bad Time");
  expect_error(header + "1,00:00:00.0000000000,free,0x100,8,0\n", 2, "bad Time");
  expect_error(header + "1,00:00:00.000002,deallocate,0x100,8,0\n",
               2,
               "bad Action \"deallocate\" (expected allocate, free or allocate failure)");
  expect_error(header + "1,00:00:00.000002,free,0xzz,8,0\n", 2, "bad Pointer \"0xzz\"");
  expect_error(header + "1,00:00:00.000002,free,,8,0\n", 2, "bad Pointer \"\"");
  expect_error(header + "1,00:00:00.000002,free,0x100,8 ,0\n", 2, "bad Size \"8 \"");
  expect_error(header + "1,00:00:00.000002,free,0x100,0x8,0\n", 2, "bad Size \"0x8\"");
  expect_error(header + "1,00:00:00.000002,free,0x100,8,stream\n", 2, "bad Stream \"stream\"");
  expect_error(header + "1,00:00:00.000002,allocate,(nil),8,0\n", 2, "returned (nil)");
  try {
    (void)parse_log_file("/nonexistent/replay.csv");
    ADD_FAILURE() << "no parse_error";
  } catch (parse_error const& e) {
    EXPECT_EQ(e.line(), 0u);
    EXPECT_NE(std::string{e.what()}.find("/nonexistent/replay.csv, line 0: cannot open the file"),
              std::string::npos);
  }
}

TEST(ReplayLogParser, PlanOfTheSample)
{
  plan const p = make_plan(parse_log_file(RMM_NEXT_REPLAY_SAMPLE), order::log);
  EXPECT_EQ(p.event_count, 10u);
  EXPECT_EQ(p.threads, (std::vector<std::uint64_t>{1001, 1002, 1003}));
  EXPECT_EQ(p.streams, (std::vector<std::uintptr_t>{0, user_stream, 0x2, 0x1}));
  ASSERT_EQ(p.per_thread.size(), 3u);
  auto indices = [&](std::size_t t) {
    std::vector<std::size_t> out;
    for (auto const& s : p.per_thread[t]) {
      out.push_back(s.index);
    }
    return out;
  };
  EXPECT_EQ(indices(0), (std::vector<std::size_t>{0, 1, 4, 6, 9}));
  EXPECT_EQ(indices(1), (std::vector<std::size_t>{2, 3, 5}));
  EXPECT_EQ(indices(2), (std::vector<std::size_t>{7, 8}));

  // Every step: operation, block, size, stream index, line. Thread 1001: allocate b0 and b1, a
  // failure (skip), free b1, allocate b4. Thread 1002: allocate b2 (per-thread stream), free
  // thread 1001's b0 on the user stream (the free's stream, not the allocation's), an unknown free
  // (skip). Thread 1003: a pointer freed earlier comes back as a new block b3; frees 1002's b2.
  struct want_step {
    operation op;
    std::size_t block;
    std::size_t size;
    std::size_t stream;
    std::size_t line;
  };
  std::vector<std::vector<want_step>> const want = {
    {{operation::allocate, 0, 1024, 0, 2},
     {operation::allocate, 1, 4096, 1, 3},
     {operation::skip, none, 1073741824, 3, 6},
     {operation::free, 1, 4096, 1, 8},
     {operation::allocate, 4, 512, 1, 11}},
    {{operation::allocate, 2, 256, 2, 4},
     {operation::free, 0, 1024, 1, 5},
     {operation::skip, none, 512, 2, 7}},
    {{operation::allocate, 3, 2048, 0, 9}, {operation::free, 2, 256, 2, 10}},
  };
  for (std::size_t t = 0; t < want.size(); ++t) {
    ASSERT_EQ(p.per_thread[t].size(), want[t].size());
    for (std::size_t k = 0; k < want[t].size(); ++k) {
      SCOPED_TRACE("thread " + std::to_string(t) + " step " + std::to_string(k));
      step const& got = p.per_thread[t][k];
      EXPECT_EQ(got.op, want[t][k].op);
      EXPECT_EQ(got.block, want[t][k].block);
      EXPECT_EQ(got.size, want[t][k].size);
      EXPECT_EQ(got.stream, want[t][k].stream);
      EXPECT_EQ(got.line, want[t][k].line);
    }
  }

  EXPECT_EQ(p.block_size, (std::vector<std::size_t>{1024, 4096, 256, 2048, 512}));
  EXPECT_EQ(p.block_stream, (std::vector<std::size_t>{0, 1, 2, 0, 1}));
  EXPECT_EQ(p.leaked_blocks, (std::vector<std::size_t>{3, 4}));
  ASSERT_EQ(p.unknown_frees.size(), 1u);
  EXPECT_EQ(p.unknown_frees[0].line, 7u);
  EXPECT_EQ(p.unknown_frees[0].pointer, 0x7f0000009000u);
  EXPECT_EQ(p.unknown_frees[0].size, 512u);
  EXPECT_TRUE(p.reallocated_lines.empty());
  EXPECT_EQ(p.failures, 1u);
  EXPECT_EQ(p.size_mismatches, 0u);
  EXPECT_EQ(p.peak_bytes_in_use, 1024u + 4096u + 256u);
}

/** @brief wait_for of every event, by event index. */
std::vector<std::size_t> waits(plan const& p)
{
  std::vector<std::size_t> out(p.event_count, none);
  for (auto const& steps : p.per_thread) {
    for (auto const& s : steps) {
      out[s.index] = s.wait_for;
    }
  }
  return out;
}

TEST(ReplayLogParser, CrossThreadWaits)
{
  auto const events = parse_log_file(RMM_NEXT_REPLAY_SAMPLE);
  // log: an event waits for the one before it whenever another thread ran that one.
  EXPECT_EQ(waits(make_plan(events, order::log)),
            (std::vector<std::size_t>{none, none, 1, none, 3, 4, 5, 6, none, 8}));
  // free_after_allocate: only frees of another thread's allocation wait, for that allocation.
  EXPECT_EQ(waits(make_plan(events, order::free_after_allocate)),
            (std::vector<std::size_t>{none, none, none, 0, none, none, none, none, 2, none}));
}

TEST(ReplayLogParser, FreesOfUnknownAndReusedPointers)
{
  auto const p =
    make_plan(parse_text(header + "1,00:00:00.000001,free,0x100,8,0\n"       // unknown
                                  "1,00:00:00.000002,allocate,0x200,8,0\n"   // b0
                                  "1,00:00:00.000003,allocate,0x200,16,0\n"  // b1: b0 lost
                                  "1,00:00:00.000004,free,0x200,20,0\n"      // frees b1
                                  "1,00:00:00.000005,free,0x200,16,0\n"      // unknown now
                                  "1,00:00:00.000006,allocate,(nil),0,0\n"   // size 0: skip
                                  "1,00:00:00.000007,free,(nil),0,0\n"));    // skip
  ASSERT_EQ(p.unknown_frees.size(), 2u);
  EXPECT_EQ(p.unknown_frees[0].line, 2u);
  EXPECT_EQ(p.unknown_frees[0].pointer, 0x100u);
  EXPECT_EQ(p.unknown_frees[1].line, 6u);
  EXPECT_EQ(p.reallocated_lines, (std::vector<std::size_t>{4}));
  EXPECT_EQ(p.leaked_blocks, (std::vector<std::size_t>{0}));
  EXPECT_EQ(p.size_mismatches, 1u);
  ASSERT_EQ(p.per_thread.size(), 1u);
  EXPECT_EQ(p.per_thread[0][3].op, operation::free);
  EXPECT_EQ(p.per_thread[0][3].size, 16u);  // the allocation's size
  EXPECT_EQ(p.per_thread[0][5].op, operation::skip);
  EXPECT_EQ(p.per_thread[0][6].op, operation::skip);
  EXPECT_EQ(p.peak_bytes_in_use, 16u);
}

/**
 * @brief Runs `p` with one std::thread per logged thread through event_gate and returns the
 * event indices in the order they ran (each recorded under a lock).
 */
std::vector<std::size_t> run_plan(plan const& p)
{
  event_gate gate{p.event_count};
  std::mutex mutex;
  std::vector<std::size_t> ran;
  std::vector<std::thread> threads;
  for (auto const& steps : p.per_thread) {
    threads.emplace_back([&, steps_ptr = &steps] {
      for (auto const& s : *steps_ptr) {
        gate.wait_for(s);
        {
          std::scoped_lock lock{mutex};
          ran.push_back(s.index);
        }
        gate.done(s);
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  return ran;
}

/** @brief A log of `threads` threads, each allocating blocks that the next thread frees. */
std::string ring_log(int threads, int rounds)
{
  std::string text = header;
  for (int r = 0; r < rounds; ++r) {
    for (int t = 0; t < threads; ++t) {
      unsigned const ptr = 0x1000u * static_cast<unsigned>(1 + r * threads + t);
      int const next     = (t + 1) % threads;
      int const size     = 256 * (t + 1);
      char line[160];
      std::snprintf(line,
                    sizeof line,
                    "%d,00:00:01.000000,allocate,0x%x,%d,0x%x\n"
                    "%d,00:00:01.000001,free,0x%x,%d,0x%x\n",
                    100 + t,
                    ptr,
                    size,
                    0xa0u + static_cast<unsigned>(t),
                    100 + next,
                    ptr,
                    size,
                    0xa0u + static_cast<unsigned>(next));
      text += line;
    }
  }
  return text;
}

TEST(ReplayLogParser, ThreadsFollowTheLogOrder)
{
  auto const events = parse_text(ring_log(4, 50));
  plan const p      = make_plan(events, order::log);
  ASSERT_EQ(p.threads.size(), 4u);
  std::vector<std::size_t> in_log(p.event_count);
  for (std::size_t i = 0; i < in_log.size(); ++i) {
    in_log[i] = i;
  }
  for (int repeat = 0; repeat < 5; ++repeat) {
    EXPECT_EQ(run_plan(p), in_log);
  }
}

TEST(ReplayLogParser, FreesRunAfterTheirAllocations)
{
  auto const events = parse_text(ring_log(4, 50));
  plan const p      = make_plan(events, order::free_after_allocate);
  EXPECT_TRUE(p.leaked_blocks.empty());
  // The allocating event of every block.
  std::vector<std::size_t> allocated_by(p.block_size.size());
  for (auto const& steps : p.per_thread) {
    for (auto const& s : steps) {
      if (s.op == operation::allocate) { allocated_by[s.block] = s.index; }
    }
  }
  for (int repeat = 0; repeat < 5; ++repeat) {
    auto const ran = run_plan(p);
    ASSERT_EQ(ran.size(), p.event_count);
    std::vector<std::size_t> position(p.event_count);
    for (std::size_t i = 0; i < ran.size(); ++i) {
      position[ran[i]] = i;
    }
    for (auto const& steps : p.per_thread) {
      std::size_t previous = 0;
      for (std::size_t k = 0; k < steps.size(); ++k) {
        if (k > 0) { EXPECT_GT(position[steps[k].index], previous); }  // a thread's own order
        previous = position[steps[k].index];
        if (steps[k].op == operation::free) {
          EXPECT_GT(position[steps[k].index], position[allocated_by[steps[k].block]]);
        }
      }
    }
  }
}

TEST(ReplayLogParser, ReleaseAllFreesEveryWaiter)
{
  plan const p = make_plan(parse_text(ring_log(3, 10)), order::log);
  event_gate gate{p.event_count};
  gate.release_all();
  for (auto const& steps : p.per_thread) {  // nothing blocks: every flag is set
    for (auto const& s : steps) {
      gate.wait_for(s);
    }
  }
  SUCCEED();
}

}  // namespace
}  // namespace rmm_next_bench::replay
