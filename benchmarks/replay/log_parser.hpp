/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// Reader of allocation logs in the format of RMM's logging_resource_adaptor, and the plan that
// replay_bench follows to replay one. No CUDA here: tests/replay_log_parser_test.cpp runs it on
// the CPU.
//
// The format, as RMM 26.10 writes it (a header line, then one line per event, no quoting):
//   Thread,Time,Action,Pointer,Size,Stream
//   2342727,15:47:02.841961,allocate,0x10012400000,1048576,0
//   Thread   decimal OS thread id
//   Time     HH:MM:SS.ffffff, wall clock of the day (microseconds); RMM's own parser accepts any
//            single character between the four numbers, and so does this one
//   Action   "allocate", "free" or "allocate failure"
//   Pointer  printf %p: 0x-prefixed hex, "(nil)" for a null pointer (every "allocate failure")
//   Size     decimal bytes
//   Stream   the cudaStream_t written through std::hex: 0x-prefixed hex, "0" for the legacy
//            default stream (0x1 is cudaStreamLegacy, 0x2 cudaStreamPerThread)
// A line that breaks these rules is an error naming its line number. Empty lines and a repeated
// header line (logs appended to one file) are skipped. A trailing '\r' is ignored.

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <istream>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

namespace rmm_next_bench::replay {

/** @brief The header line of the format. */
inline constexpr std::string_view log_header = "Thread,Time,Action,Pointer,Size,Stream";

/** @brief What a log line records. */
enum class action : std::uint8_t { allocate, free, allocate_failure };

/** @brief One line of the log. */
struct event {
  std::uint64_t thread{};    ///< Thread column
  std::uint64_t time_us{};   ///< Time column, microseconds since midnight
  action act{};              ///< Action column
  std::uintptr_t pointer{};  ///< Pointer column (0 for "(nil)")
  std::size_t size{};        ///< Size column
  std::uintptr_t stream{};   ///< Stream column
  std::size_t line{};        ///< 1-based line number in the log (the header is line 1)
};

/** @brief A log that breaks the format: what() names the source and the line. */
class parse_error : public std::runtime_error {
 public:
  parse_error(std::string const& source, std::size_t line, std::string const& what)
    : std::runtime_error{"replay log " + source + ", line " + std::to_string(line) + ": " + what},
      line_{line}
  {
  }
  /** @brief The 1-based line number of the offending line (0: the file itself). */
  [[nodiscard]] std::size_t line() const noexcept { return line_; }

 private:
  std::size_t line_;
};

namespace detail {

/** @brief `text` as an unsigned number in `base` (all of it), or false. */
template <class T>
bool parse_unsigned(std::string_view text, T& value, int base)
{
  if (text.empty()) { return false; }
  auto const* const end = text.data() + text.size();
  auto const [ptr, ec]  = std::from_chars(text.data(), end, value, base);
  return ec == std::errc{} && ptr == end;
}

/** @brief A hex value with an optional 0x / 0X prefix. */
inline bool parse_hex(std::string_view text, std::uintptr_t& value)
{
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    text.remove_prefix(2);
  }
  return parse_unsigned(text, value, 16);
}

/** @brief HH:MM:SS.ffffff (any one separator between the numbers) in microseconds. */
inline bool parse_time(std::string_view text, std::uint64_t& time_us)
{
  std::uint64_t parts[3]{};
  for (auto& part : parts) {
    auto const sep = text.find_first_not_of("0123456789");
    if (sep == std::string_view::npos || sep == 0) { return false; }
    if (!parse_unsigned(text.substr(0, sep), part, 10)) { return false; }
    text.remove_prefix(sep + 1);
  }
  // The fraction: 1 to 9 digits, read as a fraction of a second, kept to the microsecond.
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != text.npos) {
    return false;
  }
  std::uint64_t fraction{};
  if (!parse_unsigned(text, fraction, 10)) { return false; }
  for (std::size_t digits = text.size(); digits < 6; ++digits) {
    fraction *= 10;
  }
  for (std::size_t digits = text.size(); digits > 6; --digits) {
    fraction /= 10;
  }
  if (parts[0] > 23 || parts[1] > 59 || parts[2] > 60) { return false; }
  time_us = ((parts[0] * 60 + parts[1]) * 60 + parts[2]) * 1000000 + fraction;
  return true;
}

/** @brief The six comma-separated fields of `line`, or fewer/more (the caller reports it). */
inline std::vector<std::string_view> split_fields(std::string_view line)
{
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    auto const comma = line.find(',', start);
    fields.push_back(line.substr(start, comma - start));
    if (comma == std::string_view::npos) { break; }
    start = comma + 1;
  }
  return fields;
}

/** @brief One data line as an event; throws parse_error naming `line_number`. */
inline event parse_line(std::string_view line, std::size_t line_number, std::string const& source)
{
  auto fail = [&](std::string const& what) -> event {
    throw parse_error{source, line_number, what};
  };
  auto const fields = split_fields(line);
  if (fields.size() != 6) {
    return fail(std::to_string(fields.size()) + " fields, expected 6 (" + std::string{log_header} +
                "): \"" + std::string{line} + "\"");
  }
  auto quoted = [](std::string_view s) {
    std::string q;  // appended piece by piece: GCC 12 warns (-Wrestrict) on "\"" + string
    q.reserve(s.size() + 2);
    q.push_back('"');
    q.append(s);
    q.push_back('"');
    return q;
  };
  event e;
  e.line = line_number;
  if (!parse_unsigned(fields[0], e.thread, 10)) {
    return fail("bad Thread " + quoted(fields[0]) + " (expected a decimal thread id)");
  }
  if (!parse_time(fields[1], e.time_us)) {
    return fail("bad Time " + quoted(fields[1]) + " (expected HH:MM:SS.ffffff)");
  }
  if (fields[2] == "allocate") {
    e.act = action::allocate;
  } else if (fields[2] == "free") {
    e.act = action::free;
  } else if (fields[2] == "allocate failure") {
    e.act = action::allocate_failure;
  } else {
    return fail("bad Action " + quoted(fields[2]) +
                " (expected allocate, free or allocate failure)");
  }
  if (fields[3] == "(nil)") {
    e.pointer = 0;
  } else if (!parse_hex(fields[3], e.pointer)) {
    return fail("bad Pointer " + quoted(fields[3]) + " (expected 0x-prefixed hex or (nil))");
  }
  if (!parse_unsigned(fields[4], e.size, 10)) {
    return fail("bad Size " + quoted(fields[4]) + " (expected a decimal byte count)");
  }
  if (!parse_hex(fields[5], e.stream)) {
    return fail("bad Stream " + quoted(fields[5]) + " (expected 0 or 0x-prefixed hex)");
  }
  if (e.act == action::allocate && e.pointer == 0 && e.size != 0) {
    return fail("allocate of " + std::to_string(e.size) + " bytes returned (nil)");
  }
  return e;
}

}  // namespace detail

/**
 * @brief Parses a log from `in`; `source` names it in errors.
 * @throws parse_error on a missing or wrong header or a malformed line (naming its number).
 */
inline std::vector<event> parse_log(std::istream& in, std::string const& source)
{
  std::vector<event> events;
  std::string line;
  std::size_t number = 0;
  bool header_seen   = false;
  while (std::getline(in, line)) {
    ++number;
    std::string_view text{line};
    if (!text.empty() && text.back() == '\r') { text.remove_suffix(1); }
    if (text.empty()) { continue; }
    if (text == log_header) {
      header_seen = true;
      continue;
    }
    if (!header_seen) {
      throw parse_error{source,
                        number,
                        "expected the header \"" + std::string{log_header} + "\", found \"" +
                          std::string{text} + "\" (not a logging_resource_adaptor log?)"};
    }
    events.push_back(detail::parse_line(text, number, source));
  }
  if (!header_seen) { throw parse_error{source, number, "no header line: the log is empty"}; }
  return events;
}

/** @brief Parses the log file at `path`. @throws parse_error (line 0) when it cannot be read. */
inline std::vector<event> parse_log_file(std::string const& path)
{
  std::ifstream in{path};
  if (!in) { throw parse_error{path, 0, "cannot open the file"}; }
  return parse_log(in, path);
}

// ---- The replay plan ------------------------------------------------------------------------

/** @brief Which events of other threads an event waits for. */
enum class order : std::uint8_t {
  log,                  ///< every event after the one before it in the log (RMM's replay)
  free_after_allocate,  ///< a free after its allocation only; threads otherwise run freely
};

/** @brief No such index. */
inline constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

/** @brief What a replay thread does for one event. */
enum class operation : std::uint8_t {
  allocate,  ///< allocate `size` bytes on `stream` as block `block`
  free,      ///< free block `block` on `stream`
  skip,      ///< nothing (an allocate failure, a free of an unknown pointer, a null pointer)
};

/** @brief One event as its replay thread runs it. */
struct step {
  operation op{};
  std::size_t size{};          ///< bytes (a free: its block's allocation size)
  std::size_t stream{};        ///< index into plan::streams
  std::size_t block{none};     ///< allocation id, none for skip
  std::size_t wait_for{none};  ///< index of the event (another thread's) that must be done first
  std::size_t index{};         ///< position in the log (0-based among the events)
  std::size_t line{};          ///< line number in the log
};

/** @brief A free of a pointer that no earlier allocate returned (or that was already freed). */
struct unknown_free {
  std::size_t line;
  std::uintptr_t pointer;
  std::size_t size;
};

/** @brief A log turned into per-thread work. */
struct plan {
  std::vector<std::uint64_t> threads;          ///< logged thread ids, in order of first event
  std::vector<std::vector<step>> per_thread;   ///< each thread's steps, in log order
  std::vector<std::uintptr_t> streams;         ///< logged stream values, in order of first use
  std::vector<std::size_t> block_size;         ///< per block: its allocation's size
  std::vector<std::size_t> block_stream;       ///< per block: its allocation's stream index
  std::vector<std::size_t> leaked_blocks;      ///< blocks the log never frees
  std::vector<unknown_free> unknown_frees;     ///< frees replayed as skip
  std::vector<std::size_t> reallocated_lines;  ///< allocates of a pointer still live (the older
                                               ///< block counts as leaked)
  std::size_t failures{};                      ///< allocate failure lines (not replayed)
  std::size_t size_mismatches{};               ///< frees whose Size differs from their allocation's
  std::size_t event_count{};                   ///< events in the log
  std::size_t peak_bytes_in_use{};             ///< the largest sum of live sizes, in log order
};

/** @brief Builds the replay plan of `events` (parse_log's result) under `ordering`. */
inline plan make_plan(std::vector<event> const& events, order ordering = order::log)
{
  plan p;
  p.event_count = events.size();
  std::unordered_map<std::uint64_t, std::size_t> thread_index;
  std::unordered_map<std::uintptr_t, std::size_t> stream_index;
  struct live_block {
    std::size_t block;
    std::size_t event;   // the allocating event's index
    std::size_t thread;  // the allocating thread's index
  };
  std::unordered_map<std::uintptr_t, live_block> live;  // logged pointer -> its live block
  std::vector<bool> freed;
  auto index_of = [](auto& map, auto key, auto& list) {
    auto const [it, inserted] = map.try_emplace(key, list.size());
    if (inserted) { list.push_back(key); }
    return it->second;
  };

  std::size_t in_use      = 0;
  std::size_t prev_thread = none;
  for (std::size_t i = 0; i < events.size(); ++i) {
    event const& e           = events[i];
    std::size_t const thread = index_of(thread_index, e.thread, p.threads);
    if (thread == p.per_thread.size()) { p.per_thread.emplace_back(); }
    step s;
    s.index  = i;
    s.line   = e.line;
    s.stream = index_of(stream_index, e.stream, p.streams);
    s.size   = e.size;
    s.op     = operation::skip;
    if (ordering == order::log && prev_thread != none && prev_thread != thread) {
      s.wait_for = i - 1;
    }
    prev_thread = thread;

    if (e.act == action::allocate_failure) {
      ++p.failures;
    } else if (e.act == action::allocate && e.pointer != 0) {
      s.op    = operation::allocate;
      s.block = p.block_size.size();
      p.block_size.push_back(e.size);
      p.block_stream.push_back(s.stream);
      freed.push_back(false);
      auto const [it, inserted] = live.try_emplace(e.pointer, live_block{s.block, i, thread});
      if (!inserted) {  // the older block's free is missing from the log
        p.reallocated_lines.push_back(e.line);
        in_use -= p.block_size[it->second.block];
        it->second = live_block{s.block, i, thread};
      }
      in_use += e.size;
      p.peak_bytes_in_use = std::max(p.peak_bytes_in_use, in_use);
    } else if (e.act == action::free && e.pointer != 0) {
      auto const it = live.find(e.pointer);
      if (it == live.end()) {
        p.unknown_frees.push_back({e.line, e.pointer, e.size});
      } else {
        s.op    = operation::free;
        s.block = it->second.block;
        s.size  = p.block_size[s.block];
        if (e.size != s.size) { ++p.size_mismatches; }
        if (ordering == order::free_after_allocate && it->second.thread != thread) {
          s.wait_for = it->second.event;
        }
        freed[s.block] = true;
        in_use -= s.size;
        live.erase(it);
      }
    }
    p.per_thread[thread].push_back(s);
  }
  for (std::size_t b = 0; b < freed.size(); ++b) {
    if (!freed[b]) { p.leaked_blocks.push_back(b); }
  }
  return p;
}

/**
 * @brief The cross-thread order of a replay: one flag per event, set once its thread has run it;
 * a step whose `wait_for` names another thread's event waits for that flag (acquire), so what
 * that event wrote (the replay's pointer of a block) is visible after the wait.
 */
class event_gate {
 public:
  explicit event_gate(std::size_t events)
    : done_{std::make_unique<std::atomic<int>[]>(events)}, events_{events}
  {
  }

  /** @brief Waits until the event `s` depends on is done (spins briefly, then blocks). */
  void wait_for(step const& s) const
  {
    if (s.wait_for == none) { return; }
    std::atomic<int> const& flag = done_[s.wait_for];
    for (int spin = 0; spin < 1024; ++spin) {
      if (flag.load(std::memory_order_acquire) != 0) { return; }
    }
    while (flag.load(std::memory_order_acquire) == 0) {
      flag.wait(0, std::memory_order_acquire);
    }
  }

  /** @brief Marks `s` done and wakes its waiters. */
  void done(step const& s)
  {
    done_[s.index].store(1, std::memory_order_release);
    done_[s.index].notify_all();
  }

  /** @brief Marks every event done: a failed replay releases all its waiters. */
  void release_all()
  {
    for (std::size_t i = 0; i < events_; ++i) {
      done_[i].store(1, std::memory_order_release);
      done_[i].notify_all();
    }
  }

 private:
  std::unique_ptr<std::atomic<int>[]> done_;
  std::size_t events_;
};

/** @brief "log" or "free_after_allocate". */
inline char const* name_of(order o) { return o == order::log ? "log" : "free_after_allocate"; }

}  // namespace rmm_next_bench::replay
