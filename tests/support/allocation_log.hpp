/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// A strict reader of the CSV that RMM's logging_resource_adaptor writes (and rmm-next's
// logging_adaptor), for tests. It follows the columns of RMM's replay parser
// (cpp/benchmarks/utilities/log_parser.hpp over rapidcsv):
//   Thread   decimal (size_t)                  Time    HH:MM:SS.ffffff (6-digit microseconds)
//   Action   allocate | free | allocate failure
//   Pointer  hex, "0x" optional; "(nil)" is 0  Size    decimal (size_t)
//   Stream   as RMM writes it: `ostream << std::hex << cudaStream_t` ("0" or "0x..."), read in
//            hex here. RMM's parser reads this column with std::stoul in base 10, so every
//            stream but "0" reads as 0 there: `rmm_replay_stream_value` reproduces that.
// Unlike rapidcsv, it rejects what RMM's writer never produces (extra spaces, a missing or extra
// field, trailing characters in a number), so a test sees any drift from the format.

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <istream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rmm_next::test {

/** @brief The header line RMM writes first. */
inline constexpr std::string_view allocation_log_header = "Thread,Time,Action,Pointer,Size,Stream";

enum class log_action { allocate, free, allocate_failure };

/** @brief One parsed line. */
struct log_event {
  std::uint64_t thread{};
  std::string time;        ///< "HH:MM:SS.ffffff", checked
  std::int64_t time_us{};  ///< the time of day in microseconds
  log_action action{};
  std::uintptr_t pointer{};
  std::size_t size{};
  std::uintptr_t stream{};
  std::string stream_text;  ///< the Stream field as written
};

namespace detail_log {

[[noreturn]] inline void fail(std::size_t line, std::string const& what, std::string_view text)
{
  throw std::runtime_error{"allocation log line " + std::to_string(line) + ": " + what + " in \"" +
                           std::string{text} + "\""};
}

/** @brief A whole field as an unsigned number in `base`; throws unless every character is used. */
inline std::uint64_t number(std::string_view field, int base, std::size_t line, char const* what)
{
  if (field.empty() || field.front() == ' ' || field.front() == '+' || field.front() == '-') {
    fail(line, std::string{"bad "} + what, field);
  }
  std::string const s{field};
  std::size_t used = 0;
  std::uint64_t value{};
  try {
    value = std::stoull(s, &used, base);
  } catch (std::exception const&) {
    fail(line, std::string{"bad "} + what, field);
  }
  if (used != s.size()) { fail(line, std::string{"trailing characters in "} + what, field); }
  return value;
}

inline std::int64_t time_of_day_us(std::string_view t, std::size_t line)
{
  auto digits = [&](std::size_t at, std::size_t n) {
    std::int64_t v = 0;
    for (std::size_t i = at; i < at + n; ++i) {
      if (t[i] < '0' || t[i] > '9') { fail(line, "bad time", t); }
      v = v * 10 + (t[i] - '0');
    }
    return v;
  };
  if (t.size() != 15 || t[2] != ':' || t[5] != ':' || t[8] != '.') { fail(line, "bad time", t); }
  std::int64_t const h = digits(0, 2);
  std::int64_t const m = digits(3, 2);
  std::int64_t const s = digits(6, 2);
  if (h > 23 || m > 59 || s > 60) { fail(line, "bad time", t); }
  return ((h * 60 + m) * 60 + s) * 1'000'000 + digits(9, 6);
}

}  // namespace detail_log

/** @brief The value RMM's replay parser gives a Stream field (`std::stoul`, base 10, a prefix). */
inline std::uintptr_t rmm_replay_stream_value(std::string const& field)
{
  return static_cast<std::uintptr_t>(std::stoul(field));
}

/** @brief Parses a whole log; throws std::runtime_error naming the line of any deviation. */
inline std::vector<log_event> parse_allocation_log(std::istream& in)
{
  std::string text;
  if (!std::getline(in, text)) { throw std::runtime_error{"allocation log: empty"}; }
  if (text != allocation_log_header) { detail_log::fail(1, "bad header", text); }
  std::vector<log_event> events;
  for (std::size_t line = 2; std::getline(in, text); ++line) {
    std::vector<std::string_view> fields;
    std::string_view rest{text};
    for (std::size_t comma; (comma = rest.find(',')) != std::string_view::npos;) {
      fields.push_back(rest.substr(0, comma));
      rest.remove_prefix(comma + 1);
    }
    fields.push_back(rest);
    if (fields.size() != 6) { detail_log::fail(line, "not 6 fields", text); }

    log_event e;
    e.thread  = detail_log::number(fields[0], 10, line, "thread");
    e.time    = std::string{fields[1]};
    e.time_us = detail_log::time_of_day_us(fields[1], line);
    if (fields[2] == "allocate") {
      e.action = log_action::allocate;
    } else if (fields[2] == "free") {
      e.action = log_action::free;
    } else if (fields[2] == "allocate failure") {
      e.action = log_action::allocate_failure;
    } else {
      detail_log::fail(line, "bad action", fields[2]);
    }
    e.pointer     = fields[3] == "(nil)" ? 0 : detail_log::number(fields[3], 16, line, "pointer");
    e.size        = detail_log::number(fields[4], 10, line, "size");
    e.stream_text = std::string{fields[5]};
    e.stream      = detail_log::number(fields[5], 16, line, "stream");
    events.push_back(std::move(e));
  }
  return events;
}

/** @brief Parses the log file at `path`. */
inline std::vector<log_event> parse_allocation_log_file(std::string const& path)
{
  std::ifstream in{path};
  if (!in) { throw std::runtime_error{"allocation log: cannot open " + path}; }
  return parse_allocation_log(in);
}

}  // namespace rmm_next::test
