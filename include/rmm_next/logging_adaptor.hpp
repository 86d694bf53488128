/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/alignment.hpp>
#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/forwarding_members.hpp>
#include <rmm_next/detail/nvtx.hpp>
#include <rmm_next/detail/resource_calls.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/detail/upstream_argument.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

namespace detail {

/**
 * @brief One line of RMM's `logging_resource_adaptor` CSV, built on the stack.
 *
 * RMM writes `%t,%H:%M:%S.%f,<action>,%p,%zu,<stream>`: the OS thread id in decimal, the local
 * time of day with microseconds, the action, the pointer as glibc's `%p` prints it (`0x` and
 * lowercase hex, `(nil)` for nullptr), the size in decimal, and the stream as
 * `std::ostream << std::hex << cudaStream_t` prints it (`0x` and hex, `0` for nullptr).
 */
class log_line {
 public:
  log_line(std::string_view action, void const* ptr, std::size_t bytes, cudaStream_t stream)
  {
    append_decimal(thread_number());
    append(",");
    append_time();
    append(",");
    append(action);
    append(",");
    if (ptr == nullptr) {
      append("(nil)");
    } else {
      append_hex(reinterpret_cast<std::uintptr_t>(ptr));  // NOLINT
    }
    append(",");
    append_decimal(bytes);
    append(",");
    if (stream == nullptr) {
      append("0");
    } else {
      append_hex(reinterpret_cast<std::uintptr_t>(stream));  // NOLINT
    }
    append("\n");
  }

  [[nodiscard]] std::string_view text() const noexcept { return {chars_.data(), size_}; }

  /** @brief The id RMM's log gives the calling thread: `gettid()` on Linux (as spdlog's `%t`). */
  static std::uint64_t thread_number() noexcept
  {
#if defined(__linux__)
    thread_local std::uint64_t const id = static_cast<std::uint64_t>(::syscall(SYS_gettid));
#else
    thread_local std::uint64_t const id = std::hash<std::thread::id>{}(std::this_thread::get_id());
#endif
    return id;
  }

 private:
  void append(std::string_view s) noexcept
  {
    s.copy(chars_.data() + size_, s.size());
    size_ += s.size();
  }

  void append_decimal(std::uint64_t value) noexcept
  {
    size_ = static_cast<std::size_t>(
      std::to_chars(chars_.data() + size_, chars_.data() + chars_.size(), value).ptr -
      chars_.data());
  }

  void append_hex(std::uintptr_t value) noexcept
  {
    append("0x");
    size_ = static_cast<std::size_t>(
      std::to_chars(chars_.data() + size_, chars_.data() + chars_.size(), value, 16).ptr -
      chars_.data());
  }

  /** @brief `HH:MM:SS.ffffff`, local time (spdlog's default); `localtime_r` once a second. */
  void append_time() noexcept
  {
    using namespace std::chrono;
    auto const now     = system_clock::now();
    auto const seconds = floor<std::chrono::seconds>(now);
    struct cached {
      std::int64_t second = -1;
      std::array<char, 8> hms{};
    };
    thread_local cached cache;
    std::int64_t const second = seconds.time_since_epoch().count();
    if (second != cache.second) {
      std::time_t const t =
        system_clock::to_time_t(time_point_cast<system_clock::duration>(seconds));
      std::tm parts{};
      localtime_r(&t, &parts);
      two_digits(cache.hms.data(), parts.tm_hour);
      cache.hms[2] = ':';
      two_digits(cache.hms.data() + 3, parts.tm_min);
      cache.hms[5] = ':';
      two_digits(cache.hms.data() + 6, parts.tm_sec);
      cache.second = second;
    }
    append({cache.hms.data(), cache.hms.size()});
    append(".");
    auto micros = duration_cast<microseconds>(now - seconds).count();
    for (int i = 5; i >= 0; --i) {
      chars_[size_ + static_cast<std::size_t>(i)] = static_cast<char>('0' + micros % 10);
      micros /= 10;
    }
    size_ += 6;
  }

  static void two_digits(char* out, int value) noexcept
  {
    out[0] = static_cast<char>('0' + value / 10);
    out[1] = static_cast<char>('0' + value % 10);
  }

  // 20 (thread) + 15 (time) + 16 (action) + 18 (pointer) + 20 (size) + 18 (stream) + separators
  std::array<char, 128> chars_{};
  std::size_t size_ = 0;
};

/** @brief Opens `path` for writing (truncated or appended to) for a `logging_adaptor`. */
inline std::shared_ptr<std::ofstream> open_log_file(std::string const& path, bool truncate)
{
  errno     = 0;
  auto file = std::make_shared<std::ofstream>(
    path, std::ios::out | (truncate ? std::ios::trunc : std::ios::app));
  if (!file->is_open()) {
    int const error = errno != 0 ? errno : EIO;
    throw std::system_error{
      std::error_code{error, std::generic_category()},
      error_message("logging_adaptor",
                    "cannot open the log file \"" + path +
                      "\" for writing; check that its directory exists and is writable")};
  }
  return file;
}

class allocation_log;

}  // namespace detail

/**
 * @brief One place a `logging_adaptor` writes its log: a stream of the caller's, or a file the
 * sink opens. What rapids_logger's sinks are to RMM's `logging_resource_adaptor`, without a
 * logging library: `logging_adaptor mr{upstream, {rmm_next::log_sink::file("a.csv"), std::cerr}}`.
 *
 * Copies of a file sink share the open file, which closes with the last copy (and the last
 * adaptor writing to it).
 */
class log_sink {
 public:
  /** @brief Writes into `out`, which must outlive every adaptor writing to it (implicit, so that a
   * stream reads as a sink in a list). */
  log_sink(std::ostream& out) noexcept : out_{&out} {}  // NOLINT(google-explicit-constructor)

  /**
   * @brief Opens the file at `path` for writing: appended to, or emptied first when `truncate`
   * (the arguments of rapids_logger's `basic_file_sink_mt`).
   * @throws std::system_error (its `code()` the reason, its message the path) when the file cannot
   * be opened for writing.
   */
  [[nodiscard]] static log_sink file(std::string const& path, bool truncate = false)
  {
    return log_sink{detail::open_log_file(path, truncate)};
  }

 private:
  friend class detail::allocation_log;

  explicit log_sink(std::shared_ptr<std::ofstream> file) noexcept
    : file_{std::move(file)}, out_{file_.get()}
  {
  }

  std::shared_ptr<std::ostream> file_;
  std::ostream* out_;
};

namespace detail {

/** @brief The CSV header of RMM's `logging_resource_adaptor`, the first line of every log. */
inline constexpr std::string_view log_header = "Thread,Time,Action,Pointer,Size,Stream";

/** @brief The buffered output shared by the copies of one `logging_adaptor`. */
class allocation_log {
 public:
  /** @brief Bytes buffered before they are written out without a `flush()` (no `auto_flush`). */
  static constexpr std::size_t buffer_bytes = std::size_t{64} << 10;

  /** @brief Writes the header: into the buffer, or out to every sink at once with `auto_flush`. */
  allocation_log(std::vector<log_sink> sinks, bool auto_flush)
    : sinks_{std::move(sinks)}, auto_flush_{auto_flush}
  {
    if (!auto_flush_) { buffer_.reserve(buffer_bytes + 256); }
    buffer_.append(log_header).append("\n");
    if (auto_flush_) { flush(); }
  }

  allocation_log(allocation_log const&)            = delete;
  allocation_log& operator=(allocation_log const&) = delete;
  allocation_log(allocation_log&&)                 = delete;
  allocation_log& operator=(allocation_log&&)      = delete;

  ~allocation_log()
  {
    try {
      flush();
    } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor writes what it can
    }
  }

  /** @brief Appends `line`; writes the buffer out when it is full, and every line with
   * `auto_flush` (then flushes each sink before returning). */
  void write(log_line const& line) noexcept
  {
    std::lock_guard const lock{mutex_};
    try {
      buffer_.append(line.text());
      if (auto_flush_) {
        write_out_and_flush();
      } else if (buffer_.size() >= buffer_bytes) {
        write_out();
      }
    } catch (...) {  // NOLINT(bugprone-empty-catch): logging never fails an allocation or a free
    }
  }

  void flush()
  {
    std::lock_guard const lock{mutex_};
    write_out_and_flush();
  }

  [[nodiscard]] bool auto_flush() const noexcept { return auto_flush_; }

 private:
  void write_out()
  {
    for (log_sink const& sink : sinks_) {
      sink.out_->write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    }
    buffer_.clear();
  }

  void write_out_and_flush()
  {
    write_out();
    for (log_sink const& sink : sinks_) {
      sink.out_->flush();
    }
  }

  std::vector<log_sink> sinks_;
  bool auto_flush_;
  std::mutex mutex_;
  std::string buffer_;
};

/** @brief Keys the NVTX range names of every `logging_adaptor`. */
struct logging_adaptor_nvtx;

}  // namespace detail

/**
 * @brief Writes one CSV line per allocation, free and failed allocation that passes through it
 * to `Upstream`, in the format of RMM's `logging_resource_adaptor`, so that RMM's replay
 * benchmark and rmm-next's read its logs.
 *
 * The log starts with the header `Thread,Time,Action,Pointer,Size,Stream` (`header()`); then each
 * line holds the OS thread id (decimal), the local time of day (`HH:MM:SS.ffffff`), `allocate`,
 * `free` or `allocate failure`, the pointer (`0x...`, `(nil)` for nullptr), the size asked for
 * (decimal) and the stream (`0x...`, `0` for the default stream and for synchronous calls). Every
 * call is logged, 0 bytes and nullptr included, as RMM does; a failed allocation is logged, then
 * its exception is rethrown.
 *
 * The log goes to a file, a stream, or a list of `log_sink`s (each gets every line). Lines are
 * built without a lock and appended to a buffer under a mutex. Without `auto_flush` the buffer is
 * written out when it holds 64 KiB, at `flush()`, and when the last copy is destroyed; with
 * `auto_flush` the header at construction and each line before its call returns are written out
 * and flushed to every sink, so that a program that crashes leaves its log behind (at the cost of
 * a write per call). Lines are whole and in the order the calls took the mutex. Copies share the
 * log (and compare equal). `Upstream` is a resource (held by copy) or a ref; the adaptor offers
 * the upstream's members and properties, as `statistics_adaptor` does.
 */
template <class Upstream>
class RMM_NEXT_NVTX_ABI logging_adaptor
  : public cuda::forward_property<logging_adaptor<Upstream>, Upstream>,
    public detail::forwarding_members<logging_adaptor<Upstream>, Upstream> {
 public:
  /**
   * @brief Logs what goes to `upstream` into the file named by the environment variable
   * `RMM_LOG_FILE` (`default_filename()`), created or truncated, as RMM does without a file name.
   * @throws rmm_next::logic_error when `RMM_LOG_FILE` is not set; std::system_error when the file
   * cannot be opened.
   */
  template <detail::upstream_argument<logging_adaptor, Upstream> Arg = Upstream>
  explicit logging_adaptor(Arg&& upstream)
    : logging_adaptor(std::forward<Arg>(upstream), default_filename())
  {
  }

  /**
   * @brief Logs what goes to `upstream` into the file at `path`, created or truncated.
   * @param auto_flush Write out and flush every line as it is logged.
   * @throws std::system_error (its `code()` the reason, its message the path) when the file cannot
   * be opened for writing.
   */
  template <detail::upstream_argument<logging_adaptor, Upstream> Arg = Upstream>
  logging_adaptor(Arg&& upstream, std::string const& path, bool auto_flush = false)
    : logging_adaptor(std::forward<Arg>(upstream), {log_sink::file(path, true)}, auto_flush)
  {
  }

  /**
   * @brief Logs what goes to `upstream` into `out`, which must outlive every copy.
   * @param auto_flush Write out and flush every line as it is logged.
   */
  template <detail::upstream_argument<logging_adaptor, Upstream> Arg = Upstream>
  logging_adaptor(Arg&& upstream, std::ostream& out, bool auto_flush = false)
    : logging_adaptor(std::forward<Arg>(upstream), {log_sink{out}}, auto_flush)
  {
  }

  /**
   * @brief Logs what goes to `upstream` into each of `sinks` (each gets every line; none: the
   * calls are logged nowhere), as RMM's constructor from rapids_logger sinks does.
   * @param auto_flush Write out and flush every line to every sink as it is logged.
   */
  template <detail::upstream_argument<logging_adaptor, Upstream> Arg = Upstream>
  logging_adaptor(Arg&& upstream, std::vector<log_sink> sinks, bool auto_flush = false)
    : upstream_(std::forward<Arg>(upstream)),
      log_{std::make_shared<detail::allocation_log>(std::move(sinks), auto_flush)}
  {
  }

  /// `allocate(stream, bytes, alignment)` / `deallocate(stream, ptr, bytes, alignment)` when the
  /// upstream allocates in stream order, `allocate_sync` / `deallocate_sync` (logged with stream
  /// `0`) when it allocates synchronously; CCCL 3.0's names before CCCL 3.1. A free is logged
  /// before it reaches the upstream; an allocation that throws is logged as `allocate failure`,
  /// then its exception is rethrown.
  using detail::forwarding_members<logging_adaptor<Upstream>, Upstream>::allocate;
  using detail::forwarding_members<logging_adaptor<Upstream>, Upstream>::deallocate;

  /** @brief Writes the buffered lines out and flushes every sink. */
  void flush() { log_->flush(); }

  /** @brief True when every line is written out and flushed as it is logged. */
  [[nodiscard]] bool auto_flush() const noexcept { return log_->auto_flush(); }

  /** @brief The first line of every log: `Thread,Time,Action,Pointer,Size,Stream`. */
  [[nodiscard]] static std::string header() { return std::string{detail::log_header}; }

  /**
   * @brief The value of the environment variable `RMM_LOG_FILE`, the file of an adaptor constructed
   * without one.
   * @throws rmm_next::logic_error when it is not set (or empty).
   */
  [[nodiscard]] static std::string default_filename()
  {
    char const* const path = std::getenv("RMM_LOG_FILE");  // NOLINT(concurrency-mt-unsafe)
    if (path == nullptr || *path == '\0') {
      detail::throw_error<logic_error>(
        "logging_adaptor",
        "no log file was given and RMM_LOG_FILE is not set; pass a path or set RMM_LOG_FILE");
    }
    return std::string{path};
  }

  /** @brief The resource (or ref) the adaptor allocates from. */
  [[nodiscard]] Upstream const& upstream_resource() const noexcept { return upstream_; }

  /** @brief True when both share the log, i.e. one is a copy of the other. */
  friend bool operator==(logging_adaptor const& lhs, logging_adaptor const& rhs) noexcept
  {
    return lhs.log_ == rhs.log_;
  }

 private:
  friend detail::forwarding_members<logging_adaptor, Upstream>;

  template <class Calls>
  void* allocate_with(Calls const& upstream, std::size_t bytes, std::size_t alignment)
  {
    detail::nvtx_range const range{nvtx_range_names().allocate};
    void* ptr = nullptr;
    try {
      ptr = upstream.allocate(bytes, alignment);
    } catch (...) {
      log_->write(detail::log_line{"allocate failure", nullptr, bytes, upstream.stream.get()});
      throw;
    }
    log_->write(detail::log_line{"allocate", ptr, bytes, upstream.stream.get()});
    return ptr;
  }

  template <class Calls>
  void deallocate_with(Calls const& upstream,
                       void* ptr,
                       std::size_t bytes,
                       std::size_t alignment) noexcept
  {
    detail::nvtx_range const range{nvtx_range_names().deallocate};
    log_->write(detail::log_line{"free", ptr, bytes, upstream.stream.get()});
    upstream.deallocate(ptr, bytes, alignment);
  }

  static decltype(auto) nvtx_range_names() noexcept
  {
    return detail::nvtx_names<detail::logging_adaptor_nvtx>("logging_adaptor");
  }

  Upstream upstream_;
  std::shared_ptr<detail::allocation_log> log_;
};

/** @brief `logging_adaptor{upstream}` holds a copy of `upstream`. */
template <class Upstream>
logging_adaptor(Upstream) -> logging_adaptor<Upstream>;

/** @brief `logging_adaptor{upstream, path}` holds a copy of `upstream`. */
template <class Upstream>
logging_adaptor(Upstream, std::string const&) -> logging_adaptor<Upstream>;

/** @brief `logging_adaptor{upstream, path, auto_flush}` holds a copy of `upstream`. */
template <class Upstream>
logging_adaptor(Upstream, std::string const&, bool) -> logging_adaptor<Upstream>;

/** @brief `logging_adaptor{upstream, out}` holds a copy of `upstream`. */
template <class Upstream>
logging_adaptor(Upstream, std::ostream&) -> logging_adaptor<Upstream>;

/** @brief `logging_adaptor{upstream, out, auto_flush}` holds a copy of `upstream`. */
template <class Upstream>
logging_adaptor(Upstream, std::ostream&, bool) -> logging_adaptor<Upstream>;

/** @brief `logging_adaptor{upstream, {sinks...}}` holds a copy of `upstream`. */
template <class Upstream>
logging_adaptor(Upstream, std::vector<log_sink>) -> logging_adaptor<Upstream>;

/** @brief `logging_adaptor{upstream, {sinks...}, auto_flush}` holds a copy of `upstream`. */
template <class Upstream>
logging_adaptor(Upstream, std::vector<log_sink>, bool) -> logging_adaptor<Upstream>;

static_assert(detail::stream_ordered_resource_with<logging_adaptor<device_async_resource_ref>,
                                                   cuda::mr::device_accessible>);
static_assert(detail::synchronous_resource_with<logging_adaptor<device_resource_ref>,
                                                cuda::mr::device_accessible>);
static_assert(
  std::is_constructible_v<device_async_resource_ref, logging_adaptor<device_async_resource_ref>&>);

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
