/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// What nccl_allreduce_bench runs and how it reports it, without CUDA or NCCL: the command line,
// the sizes, the iterations per size, the bandwidths and the CSV/JSON rows (a CPU test checks
// them).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rmm_next_bench {

/** @brief The buffer kinds, in the order they run. */
inline std::vector<std::string> const& nccl_buffer_kinds()
{
  static std::vector<std::string> const kinds{"cudaMalloc", "ncclMemAlloc", "vmm_resource"};
  return kinds;
}

/** @brief The command line: the launcher's (rank < 0) or one rank's. */
struct nccl_bench_options {
  std::string out_dir            = ".";
  int gpus                       = 0;  ///< 0: every visible GPU
  std::size_t min_bytes          = std::size_t{1} << 20;
  std::size_t max_bytes          = std::size_t{1} << 30;
  int iterations                 = 0;  ///< 0: by size (iterations_for)
  int warmup                     = 5;
  std::vector<std::string> kinds = nccl_buffer_kinds();
  int rank                       = -1;  ///< set by the launcher for the processes it starts
  int ranks                      = 0;
  std::string id_file;
};

/** @brief `text` as a byte count: digits with an optional K, M or G suffix (powers of 1024). */
inline std::size_t parse_bytes(std::string_view text)
{
  std::size_t digits = 0;
  std::size_t value  = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    value = value * 10 + static_cast<std::size_t>(text[digits] - '0');
    ++digits;
  }
  std::string_view const suffix = text.substr(digits);
  int shift                     = 0;
  if (suffix == "K" || suffix == "KiB") {
    shift = 10;
  } else if (suffix == "M" || suffix == "MiB") {
    shift = 20;
  } else if (suffix == "G" || suffix == "GiB") {
    shift = 30;
  } else if (!suffix.empty()) {
    digits = 0;
  }
  if (digits == 0 || value == 0) {
    throw std::invalid_argument("nccl_allreduce_bench: '" + std::string{text} +
                                "' is not a byte count; write e.g. 1M, 64MiB or 1G");
  }
  return value << shift;
}

/** @brief Parses `argv`; throws std::invalid_argument naming what is wrong. */
inline nccl_bench_options parse_nccl_bench_options(std::vector<std::string> const& args)
{
  nccl_bench_options o;
  auto value = [&](std::size_t& i) -> std::string const& {
    if (i + 1 >= args.size()) {
      throw std::invalid_argument("nccl_allreduce_bench: " + args[i] + " needs a value");
    }
    return args[++i];
  };
  auto number = [](std::string const& flag, std::string const& text) {
    std::size_t used = 0;
    int n{};
    try {
      n = std::stoi(text, &used);
    } catch (std::exception const&) {
      used = 0;
    }
    if (used != text.size() || n < 0) {
      throw std::invalid_argument("nccl_allreduce_bench: " + flag + " " + text +
                                  " is not a count; pass a whole number >= 0");
    }
    return n;
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string const& a = args[i];
    if (a == "--out") {
      o.out_dir = value(i);
    } else if (a == "--gpus") {
      o.gpus = number(a, value(i));
    } else if (a == "--min-bytes") {
      o.min_bytes = parse_bytes(value(i));
    } else if (a == "--max-bytes") {
      o.max_bytes = parse_bytes(value(i));
    } else if (a == "--iterations") {
      o.iterations = number(a, value(i));
    } else if (a == "--warmup") {
      o.warmup = number(a, value(i));
    } else if (a == "--kinds") {
      o.kinds.clear();
      std::string const& list = value(i);
      std::size_t start       = 0;
      while (start <= list.size()) {
        std::size_t const comma = list.find(',', start);
        std::string const kind =
          list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        bool known = false;
        for (auto const& k : nccl_buffer_kinds()) {
          known = known || k == kind;
        }
        if (!known) {
          throw std::invalid_argument("nccl_allreduce_bench: unknown buffer kind '" + kind +
                                      "'; pass a comma-separated list of cudaMalloc, "
                                      "ncclMemAlloc, vmm_resource");
        }
        o.kinds.push_back(kind);
        if (comma == std::string::npos) { break; }
        start = comma + 1;
      }
    } else if (a == "--rank") {
      o.rank = number(a, value(i));
    } else if (a == "--ranks") {
      o.ranks = number(a, value(i));
    } else if (a == "--id-file") {
      o.id_file = value(i);
    } else {
      throw std::invalid_argument("nccl_allreduce_bench: unknown argument '" + a +
                                  "'; see the comment at the top of nccl_allreduce_bench.cu");
    }
  }
  if (o.min_bytes > o.max_bytes) {
    throw std::invalid_argument("nccl_allreduce_bench: --min-bytes exceeds --max-bytes");
  }
  if (o.rank >= 0 && (o.ranks <= o.rank || o.id_file.empty())) {
    throw std::invalid_argument(
      "nccl_allreduce_bench: --rank needs --ranks above it and --id-file (the launcher passes "
      "them; start the program without --rank)");
  }
  return o;
}

/** @brief The sizes from `min` to `max`, doubling (`max` last even when not a doubling). */
inline std::vector<std::size_t> nccl_bench_sizes(std::size_t min, std::size_t max)
{
  std::vector<std::size_t> sizes;
  for (std::size_t s = min; s <= max && s != 0; s *= 2) {
    sizes.push_back(s);
    if (s > max / 2) { break; }
  }
  if (sizes.empty() || sizes.back() != max) { sizes.push_back(max); }
  return sizes;
}

/** @brief Timed iterations for `bytes`: `fixed` when given, else fewer as the size grows. */
inline int iterations_for(std::size_t bytes, int fixed)
{
  if (fixed > 0) { return fixed; }
  if (bytes <= (std::size_t{16} << 20)) { return 50; }
  if (bytes <= (std::size_t{128} << 20)) { return 20; }
  return 10;
}

/** @brief One measured size of one kind. */
struct nccl_bench_row {
  std::string kind;
  std::size_t bytes{};
  int ranks{};
  int iterations{};
  double seconds{};  ///< one all-reduce, the slowest rank's average
  std::uint64_t wrong{};
  bool registered{};

  /** @brief Bytes per second of the buffer (nccl-tests' algbw). */
  [[nodiscard]] double algbw() const
  {
    return seconds > 0 ? static_cast<double>(bytes) / seconds : 0;
  }
  /** @brief algbw * 2 (n - 1) / n: the bytes each link carries in a ring (nccl-tests' busbw). */
  [[nodiscard]] double busbw() const { return ranks > 0 ? algbw() * 2.0 * (ranks - 1) / ranks : 0; }
};

inline std::string csv_header()
{
  return "kind,bytes,ranks,iterations,time_us,algbw_GBps,busbw_GBps,wrong,registered\n";
}

/** @brief `value` with three decimals. */
inline std::string fixed3(double value)
{
  char text[64];
  std::snprintf(text, sizeof text, "%.3f", value);
  return text;
}

/** @brief The columns of `r` as csv_header() names them, as text. */
inline std::vector<std::string> row_values(nccl_bench_row const& r)
{
  return {r.kind,
          std::to_string(r.bytes),
          std::to_string(r.ranks),
          std::to_string(r.iterations),
          fixed3(r.seconds * 1e6),
          fixed3(r.algbw() / 1e9),
          fixed3(r.busbw() / 1e9),
          std::to_string(r.wrong),
          r.registered ? "1" : "0"};
}

inline std::string csv_line(nccl_bench_row const& r)
{
  std::string line;
  for (std::string const& v : row_values(r)) {
    line += (line.empty() ? "" : ",") + v;
  }
  return line + "\n";
}

inline std::string json_object(nccl_bench_row const& r)
{
  static constexpr char const* names[] = {"kind",
                                          "bytes",
                                          "ranks",
                                          "iterations",
                                          "time_us",
                                          "algbw_GBps",
                                          "busbw_GBps",
                                          "wrong",
                                          "registered"};
  std::vector<std::string> values      = row_values(r);
  values.front()                       = "\"" + values.front() + "\"";
  values.back()                        = r.registered ? "true" : "false";
  std::string text                     = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    text += (i == 0 ? "\"" : ", \"") + std::string{names[i]} + "\": " + values[i];
  }
  return text + "}";
}

}  // namespace rmm_next_bench
