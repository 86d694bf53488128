/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// CPU tests of logging_adaptor over resources that need no GPU: the log parsed back with the
// column rules of RMM's replay parser (header, six fields a line, the OS thread id, the time of
// day, hex pointers equal to the returned ones, sizes, streams as RMM prints them), failure lines
// on an upstream that throws, the file constructor and its error, flush semantics (buffered until
// flush(), the buffer size or the last copy's destruction), whole lines from 16 threads, and the
// hand-written sample of RMM's format under tests/data read by the same parser; auto_flush (each
// line in the file before flush(), also in a child killed by SIGKILL), several sinks, header()
// and the RMM_LOG_FILE default.

#include "support/allocation_log.hpp"
#include "support/counting_buffer.hpp"
#include "support/fake_resource.hpp"
#include "support/refusing_resource.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/logging_adaptor.hpp>
#include <rmm_next/resource_ref.hpp>

#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

namespace rmm_next::test {
namespace {

using adaptor = logging_adaptor<fake_resource>;

cudaStream_t fake_stream(std::uintptr_t value)
{
  return reinterpret_cast<cudaStream_t>(value);  // NOLINT: a fake stream
}

std::uintptr_t address(void const* ptr) { return reinterpret_cast<std::uintptr_t>(ptr); }  // NOLINT

std::uint64_t os_thread_id() { return static_cast<std::uint64_t>(::syscall(SYS_gettid)); }

/** @brief The Stream field as RMM writes it: `ostream << std::hex << stream.value()`. */
std::string rmm_stream_text(cudaStream_t stream)
{
  std::ostringstream out;
  out << std::hex << stream;
  return out.str();
}

std::vector<log_event> parse(std::string const& text)
{
  std::istringstream in{text};
  return parse_allocation_log(in);
}

// ---- What the adaptor is ------------------------------------------------------------------------

static_assert(rmm_next::detail::stream_ordered_resource_with<logging_adaptor<async_device_resource>,
                                                             cuda::mr::device_accessible>);
static_assert(rmm_next::detail::synchronous_resource_with<logging_adaptor<device_resource_ref>,
                                                          cuda::mr::device_accessible>);
static_assert(
  !rmm_next::detail::stream_ordered_resource_with<logging_adaptor<device_resource_ref>>);
static_assert(cuda::has_property<adaptor, cuda::mr::host_accessible>);
static_assert(
  !cuda::has_property<logging_adaptor<async_device_resource>, cuda::mr::host_accessible>);
static_assert(std::is_constructible_v<host_device_async_resource_ref, adaptor&>);
static_assert(std::is_copy_constructible_v<adaptor> && std::is_copy_assignable_v<adaptor>);

// ---- The lines ----------------------------------------------------------------------------------

TEST(logging_adaptor, EachCallIsOneLineInRmmsFormat)
{
  std::ostringstream out;
  fake_resource upstream;
  std::uintptr_t p = 0;  // the addresses, kept as numbers: the memory is freed below
  std::uintptr_t q = 0;
  char printed[32];  // as glibc's %p prints p, RMM's rule for the Pointer column
  {
    adaptor a{upstream, out};
    void* const pp = a.allocate(fake_stream(0x55d0c1e2a3b0), 1000, 64);
    void* const qq = a.allocate_sync(24);
    p              = address(pp);
    q              = address(qq);
    std::snprintf(printed, sizeof(printed), "%p", pp);
    a.deallocate(fake_stream(0x55d0c1e2a3b0), pp, 1000, 64);
    a.deallocate_sync(qq, 24);
    EXPECT_EQ(a.allocate(fake_stream(0x2), 0), nullptr);  // logged as RMM does
    a.deallocate(fake_stream(0x2), nullptr, 0);
  }  // the last copy writes the log out
  std::vector<log_event> const events = parse(out.str());
  ASSERT_EQ(events.size(), 6U) << out.str();
  std::uint64_t const tid = os_thread_id();
  for (auto const& e : events) {
    EXPECT_EQ(e.thread, tid);
  }
  EXPECT_EQ(events[0].action, log_action::allocate);
  EXPECT_EQ(events[0].pointer, p);
  EXPECT_EQ(events[0].size, 1000U);
  EXPECT_EQ(events[0].stream, 0x55d0c1e2a3b0U);
  EXPECT_EQ(events[0].stream_text, rmm_stream_text(fake_stream(0x55d0c1e2a3b0)));
  EXPECT_EQ(events[1].action, log_action::allocate);
  EXPECT_EQ(events[1].pointer, q);
  EXPECT_EQ(events[1].size, 24U);
  EXPECT_EQ(events[1].stream_text, "0");  // synchronous: the default stream, as RMM logs it
  EXPECT_EQ(events[1].stream_text, rmm_stream_text(cudaStream_t{}));
  EXPECT_EQ(events[2].action, log_action::free);
  EXPECT_EQ(events[2].pointer, p);
  EXPECT_EQ(events[2].size, 1000U);
  EXPECT_EQ(events[3].action, log_action::free);
  EXPECT_EQ(events[3].pointer, q);
  EXPECT_EQ(events[4].action, log_action::allocate);
  EXPECT_EQ(events[4].pointer, 0U);
  EXPECT_EQ(events[4].stream_text, "0x2");
  EXPECT_EQ(events[5].action, log_action::free);
  for (std::size_t i = 1; i < events.size(); ++i) {
    EXPECT_LE(events[i - 1].time_us, events[i].time_us);  // in order (no midnight in 1 ms)
  }

  // The text itself: glibc's %p for the pointers, "(nil)" for nullptr, nothing else on a line.
  std::istringstream lines{out.str()};
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "Thread,Time,Action,Pointer,Size,Stream");
  std::getline(lines, line);
  EXPECT_EQ(line.substr(0, line.find(',')), std::to_string(tid));
  EXPECT_NE(line.find(",allocate," + std::string{printed} + ",1000,0x55d0c1e2a3b0"),
            std::string::npos)
    << line;
  for (int i = 0; i < 4; ++i) {
    std::getline(lines, line);
  }
  EXPECT_NE(line.find(",allocate,(nil),0,0x2"), std::string::npos) << line;
  // What RMM's replay parser reads from the Stream column: std::stoul, base 10.
  EXPECT_EQ(rmm_replay_stream_value(events[1].stream_text), 0U);
}

TEST(logging_adaptor, TimeIsTheLocalTimeOfDayWithMicroseconds)
{
  std::ostringstream out;
  adaptor a{fake_resource{}, out};
  auto const before = std::chrono::system_clock::now();
  void* p           = a.allocate_sync(8);
  auto const after  = std::chrono::system_clock::now();
  a.deallocate_sync(p, 8);
  a.flush();
  auto local_us = [](std::chrono::system_clock::time_point t) {
    std::time_t const s = std::chrono::system_clock::to_time_t(t);
    std::tm parts{};
    localtime_r(&s, &parts);
    auto const us = std::chrono::duration_cast<std::chrono::microseconds>(
                      t - std::chrono::floor<std::chrono::seconds>(t))
                      .count();
    return ((parts.tm_hour * 60LL + parts.tm_min) * 60 + parts.tm_sec) * 1'000'000 + us;
  };
  std::vector<log_event> const events = parse(out.str());
  ASSERT_EQ(events.size(), 2U);
  std::int64_t const lo = local_us(before);
  std::int64_t const hi = local_us(after);
  if (lo <= hi) {  // not across midnight
    EXPECT_GE(events[0].time_us, lo) << events[0].time;
    EXPECT_LE(events[0].time_us, hi) << events[0].time;
  }
}

TEST(logging_adaptor, FailedAllocationIsLoggedThenRethrown)
{
  std::ostringstream out;
  logging_adaptor<refusing_resource> a{refusing_resource{}, out};
  try {
    [[maybe_unused]] void* p = a.allocate(fake_stream(0xbeef00), 4096, 256);
    ADD_FAILURE() << "expected out_of_memory";
  } catch (out_of_memory const& e) {
    EXPECT_STREQ(e.what(), "rmm_next::out_of_memory: refused");
  }
  EXPECT_THROW((void)a.allocate_sync(std::size_t{1} << 50), out_of_memory);
  a.flush();
  std::vector<log_event> const events = parse(out.str());
  ASSERT_EQ(events.size(), 2U) << out.str();
  EXPECT_EQ(events[0].action, log_action::allocate_failure);
  EXPECT_EQ(events[0].pointer, 0U);
  EXPECT_EQ(events[0].size, 4096U);
  EXPECT_EQ(events[0].stream_text, "0xbeef00");
  EXPECT_EQ(events[1].action, log_action::allocate_failure);
  EXPECT_EQ(events[1].size, std::size_t{1} << 50);
  EXPECT_EQ(events[1].stream_text, "0");
  EXPECT_NE(out.str().find(",allocate failure,(nil),4096,0xbeef00\n"), std::string::npos);
}

TEST(logging_adaptor, AdaptsARefAndEveryMemberSpelling)
{
  std::ostringstream out;
  fake_resource upstream;
  logging_adaptor<host_device_async_resource_ref> a{host_device_async_resource_ref{upstream}, out};
  device_async_resource_ref ref{a};
  void* p                 = ref.allocate(fake_stream(0x10), 512, 256);
  std::uintptr_t const pa = address(p);
  ref.deallocate(fake_stream(0x10), p, 512, 256);
#if !RMM_NEXT_CCCL_STREAM_ORDERED_MR
  void* q = a.allocate_async(8, 16, fake_stream(0x20));
  a.deallocate_async(q, 8, 16, fake_stream(0x20));
  std::size_t constexpr lines = 4;
#else
  std::size_t constexpr lines = 2;
#endif
  a.flush();
  std::vector<log_event> const events = parse(out.str());
  ASSERT_EQ(events.size(), lines);
  EXPECT_EQ(events[0].pointer, pa);
  EXPECT_EQ(events[1].pointer, pa);
  EXPECT_EQ(events[1].stream, 0x10U);
  EXPECT_EQ(upstream.allocations(), static_cast<long>(lines / 2));
  EXPECT_EQ(upstream.deallocations(), static_cast<long>(lines / 2));
}

// ---- Buffering ----------------------------------------------------------------------------------

TEST(logging_adaptor, BufferedUntilFlushTheBufferSizeOrTheLastCopy)
{
  std::ostringstream out;
  fake_resource upstream;
  {
    adaptor a{upstream, out};
    EXPECT_EQ(out.str(), "");  // even the header waits
    a.deallocate_sync(a.allocate_sync(8), 8);
    EXPECT_EQ(out.str(), "");
    a.flush();
    EXPECT_EQ(parse(out.str()).size(), 2U);

    // Past the buffer's size, lines go out without a flush.
    std::size_t const before = out.str().size();
    std::size_t logged       = 0;
    while (out.str().size() == before) {
      a.deallocate_sync(a.allocate_sync(64), 64);
      logged += 2;
      ASSERT_LT(logged, 100'000U);
    }
    EXPECT_GE(out.str().size() - before, detail::allocation_log::buffer_bytes);
    {
      adaptor copy = a;
      copy.deallocate_sync(copy.allocate_sync(16), 16);
    }
    std::size_t const kept = out.str().size();
    a.deallocate_sync(a.allocate_sync(32), 32);
    EXPECT_EQ(out.str().size(), kept);  // a copy's destruction writes nothing out
  }
  std::vector<log_event> const events = parse(out.str());  // the last copy wrote the rest
  EXPECT_EQ(events.back().action, log_action::free);
  EXPECT_EQ(events.back().size, 32U);
  EXPECT_EQ(events[events.size() - 3].size, 16U);
}

TEST(logging_adaptor, WritesToAFileAndNamesAPathItCannotOpen)
{
  std::filesystem::path const dir =
    std::filesystem::temp_directory_path() / ("rmm_next_log_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string const path = (dir / "trace.csv").string();
  {
    std::ofstream{path} << "old contents that must go\n";
  }
  std::uintptr_t pa = 0;
  {
    adaptor a{fake_resource{}, path};
    void* const p = a.allocate_sync(100);
    pa            = address(p);
    a.deallocate_sync(p, 100);
  }
  std::vector<log_event> const events = parse_allocation_log_file(path);  // truncated, then ours
  ASSERT_EQ(events.size(), 2U);
  EXPECT_EQ(events[0].pointer, pa);
  EXPECT_EQ(events[1].pointer, pa);

  std::string const bad = (dir / "no such dir" / "trace.csv").string();
  try {
    adaptor a{fake_resource{}, bad};
    ADD_FAILURE() << "expected std::system_error";
  } catch (std::system_error const& e) {
    std::string const what = e.what();
    EXPECT_EQ(what.rfind("rmm_next::logging_adaptor: cannot open the log file \"" + bad + "\"", 0),
              0U)
      << what;
    EXPECT_EQ(e.code(), std::errc::no_such_file_or_directory) << what;
  }
  std::filesystem::remove_all(dir);
}

// ---- auto_flush ---------------------------------------------------------------------------------

/** @brief A directory of its own under the temporary directory, removed with the object. */
class temp_dir {
 public:
  explicit temp_dir(std::string const& name)
    : path_{std::filesystem::temp_directory_path() /
            (name + "_" + std::to_string(::getpid()) + "_" +
             std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()))}
  {
    std::filesystem::create_directories(path_);
  }
  temp_dir(temp_dir const&)            = delete;
  temp_dir& operator=(temp_dir const&) = delete;
  ~temp_dir() { std::filesystem::remove_all(path_); }
  [[nodiscard]] std::string file(std::string const& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

/** @brief What the file at `path` holds now, read through a stream of its own. */
std::string contents(std::string const& path)
{
  std::ifstream in{path};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(logging_adaptor, AutoFlushWritesEachLineToTheFileAsItIsLogged)
{
  temp_dir const dir{"rmm_next_auto_flush"};
  std::string const path = dir.file("trace.csv");
  adaptor a{fake_resource{}, path, true};
  EXPECT_TRUE(a.auto_flush());
  EXPECT_EQ(contents(path), "Thread,Time,Action,Pointer,Size,Stream\n");  // at construction

  void* p = a.allocate(fake_stream(0x40), 1000);
  {
    std::vector<log_event> const events = parse_allocation_log_file(path);  // no flush()
    ASSERT_EQ(events.size(), 1U);
    EXPECT_EQ(events[0].action, log_action::allocate);
    EXPECT_EQ(events[0].pointer, address(p));
    EXPECT_EQ(events[0].size, 1000U);
    EXPECT_EQ(events[0].stream, 0x40U);
  }
  a.deallocate(fake_stream(0x40), p, 1000);
  std::vector<log_event> const events = parse_allocation_log_file(path);
  ASSERT_EQ(events.size(), 2U);
  EXPECT_EQ(events[1].action, log_action::free);
  EXPECT_EQ(events[1].pointer, address(p));

  // Without auto_flush, the same calls wait in the buffer.
  std::string const buffered = dir.file("buffered.csv");
  adaptor b{fake_resource{}, buffered};
  EXPECT_FALSE(b.auto_flush());
  b.deallocate_sync(b.allocate_sync(8), 8);
  EXPECT_EQ(contents(buffered), "");
}

TEST(logging_adaptor, AutoFlushFlushesTheStreamAtEachLine)
{
  counting_buffer buffer;
  std::ostream out{&buffer};
  logging_adaptor a{fake_resource{}, out, true};
  static_assert(std::is_same_v<decltype(a), adaptor>);
  EXPECT_EQ(buffer.str(), "Thread,Time,Action,Pointer,Size,Stream\n");
  EXPECT_EQ(buffer.syncs, 1);
  void* p = a.allocate_sync(64);
  EXPECT_EQ(parse(buffer.str()).size(), 1U);
  EXPECT_EQ(buffer.syncs, 2);
  a.deallocate_sync(p, 64);
  EXPECT_EQ(parse(buffer.str()).size(), 2U);
  EXPECT_EQ(buffer.syncs, 3);
}

/**
 * @brief Runs `child` in a forked child that then dies of SIGKILL, as a crashing program does:
 * nothing is flushed or destroyed. @return true when the child was killed as planned.
 */
bool killed_in_forked_child(std::function<void()> const& child)
{
  std::fflush(nullptr);
  pid_t const pid = ::fork();
  if (pid < 0) { return false; }
  if (pid == 0) {
    child();
    ::kill(::getpid(), SIGKILL);
    std::_Exit(1);  // not reached
  }
  int status{};
  return ::waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

TEST(logging_adaptor, AProgramKilledWithAutoFlushLeavesItsLogBehind)
{
  temp_dir const dir{"rmm_next_killed"};
  std::string const flushed  = dir.file("auto_flush.csv");
  std::string const buffered = dir.file("buffered.csv");
  ASSERT_TRUE(killed_in_forked_child([&] {
    static adaptor a{fake_resource{}, flushed, true};  // never destroyed: the child is killed
    static adaptor b{fake_resource{}, buffered};
    void* p = a.allocate_sync(4096);
    void* q = b.allocate_sync(4096);
    (void)p;
    (void)q;
  }));
  std::vector<log_event> const events = parse_allocation_log_file(flushed);
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events[0].action, log_action::allocate);
  EXPECT_EQ(events[0].size, 4096U);
  EXPECT_EQ(contents(buffered), "");  // the buffer died with the process
}

// ---- Sinks, header, RMM_LOG_FILE ----------------------------------------------------------------

TEST(logging_adaptor, EachSinkGetsEveryLine)
{
  temp_dir const dir{"rmm_next_sinks"};
  std::string const first  = dir.file("first.csv");
  std::string const second = dir.file("second.csv");
  {
    std::ofstream{first} << "truncated\n";
    std::ofstream{second} << "kept\n";
  }
  std::ostringstream out;
  fake_resource upstream;
  std::uintptr_t pa = 0;
  {
    logging_adaptor a{upstream, {log_sink::file(first, true), log_sink::file(second), out}};
    static_assert(std::is_same_v<decltype(a), adaptor>);
    void* p = a.allocate(fake_stream(0x30), 100);
    pa      = address(p);
    a.deallocate(fake_stream(0x30), p, 100);
  }  // the last copy writes to every sink
  EXPECT_EQ(upstream.allocations(), 1);
  for (std::string const& text : {contents(first), out.str()}) {
    std::vector<log_event> const events = parse(text);
    ASSERT_EQ(events.size(), 2U) << text;
    EXPECT_EQ(events[0].pointer, pa);
    EXPECT_EQ(events[1].action, log_action::free);
  }
  std::string const appended = contents(second);  // log_sink::file appends unless told to truncate
  ASSERT_EQ(appended.rfind("kept\n", 0), 0U) << appended;
  EXPECT_EQ(appended.substr(5), out.str());

  // No sink: the calls go through, logged nowhere.
  adaptor none{upstream, std::vector<log_sink>{}};
  none.deallocate_sync(none.allocate_sync(8), 8);
  none.flush();
  EXPECT_EQ(upstream.allocations(), 2);

  // A file sink names the path it cannot open, as the path constructor does.
  std::string const bad = dir.file("missing/trace.csv");
  try {
    (void)log_sink::file(bad);
    ADD_FAILURE() << "expected std::system_error";
  } catch (std::system_error const& e) {
    EXPECT_EQ(std::string{e.what()}.rfind(
                "rmm_next::logging_adaptor: cannot open the log file \"" + bad + "\"", 0),
              0U)
      << e.what();
    EXPECT_EQ(e.code(), std::errc::no_such_file_or_directory);
  }
}

TEST(logging_adaptor, HeaderIsTheFirstLineOfTheLog)
{
  EXPECT_EQ(adaptor::header(), "Thread,Time,Action,Pointer,Size,Stream");
  std::ostringstream out;
  adaptor a{fake_resource{}, out};
  EXPECT_EQ(a.header(), adaptor::header());
  a.flush();
  EXPECT_EQ(out.str(), a.header() + "\n");
}

/** @brief Sets or unsets an environment variable for one scope, then puts back what was there. */
class scoped_env {
 public:
  scoped_env(char const* name, char const* value) : name_{name}
  {
    if (char const* old = std::getenv(name)) { old_ = old; }
    if (value == nullptr) {
      ::unsetenv(name);
    } else {
      ::setenv(name, value, 1);
    }
  }
  scoped_env(scoped_env const&)            = delete;
  scoped_env& operator=(scoped_env const&) = delete;
  ~scoped_env()
  {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  char const* name_;
  std::optional<std::string> old_;
};

TEST(logging_adaptor, WithoutAPathLogsToRmmLogFile)
{
  temp_dir const dir{"rmm_next_env"};
  {
    scoped_env const unset{"RMM_LOG_FILE", nullptr};
    try {
      adaptor a{fake_resource{}};
      ADD_FAILURE() << "expected rmm_next::logic_error";
    } catch (logic_error const& e) {
      EXPECT_STREQ(e.what(),
                   "rmm_next::logging_adaptor: no log file was given and RMM_LOG_FILE is not set; "
                   "pass a path or set RMM_LOG_FILE");
    }
    EXPECT_THROW((void)adaptor::default_filename(), logic_error);
  }
  {
    scoped_env const empty{"RMM_LOG_FILE", ""};
    EXPECT_THROW(adaptor{fake_resource{}}, logic_error);
  }
  std::string const path = dir.file("from_env.csv");
  scoped_env const set{"RMM_LOG_FILE", path.c_str()};
  EXPECT_EQ(adaptor::default_filename(), path);
  std::uintptr_t pa = 0;
  {
    logging_adaptor a{fake_resource{}};
    static_assert(std::is_same_v<decltype(a), adaptor>);
    void* p = a.allocate_sync(100);
    pa      = address(p);
    a.deallocate_sync(p, 100);
  }
  std::vector<log_event> const events = parse_allocation_log_file(path);
  ASSERT_EQ(events.size(), 2U);
  EXPECT_EQ(events[0].pointer, pa);

  // RMM_LOG_FILE with auto_flush, as RMM's (upstream, get_default_filename(), true).
  adaptor b{fake_resource{}, adaptor::default_filename(), true};
  b.deallocate_sync(b.allocate_sync(8), 8);
  EXPECT_EQ(parse_allocation_log_file(path).size(), 2U);
  EXPECT_EQ(parse_allocation_log_file(path)[0].size, 8U);
}

// ---- Threads ------------------------------------------------------------------------------------

TEST(logging_adaptor, SixteenThreadsWriteWholeLines)
{
  constexpr int threads    = 16;
  constexpr int iterations = 1000;
  std::ostringstream out;
  fake_resource upstream;
  std::vector<std::uint64_t> tids(threads);
  {
    adaptor a{upstream, out};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        tids[static_cast<std::size_t>(t)] = os_thread_id();
        adaptor mine                      = a;
        auto const stream                 = fake_stream(static_cast<std::uintptr_t>(t + 1) << 8);
        std::size_t const bytes           = static_cast<std::size_t>(t + 1) * 8;
        for (int i = 0; i < iterations; ++i) {
          void* p = mine.allocate(stream, bytes);
          mine.deallocate(stream, p, bytes);
        }
      });
    }
    for (auto& th : pool) {
      th.join();
    }
  }
  std::vector<log_event> const events = parse(out.str());  // throws on a torn line
  ASSERT_EQ(events.size(), static_cast<std::size_t>(threads * iterations * 2));
  std::map<std::uint64_t, int> thread_of;
  for (int t = 0; t < threads; ++t) {
    thread_of[tids[static_cast<std::size_t>(t)]] = t;
  }
  ASSERT_EQ(thread_of.size(), static_cast<std::size_t>(threads));
  std::map<std::uint64_t, std::uintptr_t> live;  // per thread: the pointer allocated, not freed
  std::vector<int> allocations(threads);
  for (auto const& e : events) {
    auto const it = thread_of.find(e.thread);
    ASSERT_NE(it, thread_of.end()) << e.thread;
    int const t = it->second;
    EXPECT_EQ(e.stream, static_cast<std::uintptr_t>(t + 1) << 8);
    EXPECT_EQ(e.size, static_cast<std::size_t>(t + 1) * 8);
    if (e.action == log_action::allocate) {
      EXPECT_EQ(live.count(e.thread), 0U);
      live[e.thread] = e.pointer;
      ++allocations[static_cast<std::size_t>(t)];
    } else {
      ASSERT_EQ(e.action, log_action::free);
      EXPECT_EQ(live.at(e.thread), e.pointer);  // each free follows its own allocation
      live.erase(e.thread);
    }
  }
  for (int n : allocations) {
    EXPECT_EQ(n, iterations);
  }
  EXPECT_TRUE(live.empty());
}

// ---- RMM's own format ---------------------------------------------------------------------------

TEST(logging_adaptor, ParserReadsAHandWrittenRmmLog)
{
  std::vector<log_event> const events = parse_allocation_log_file(
    (std::filesystem::path{__FILE__}.parent_path() / "data" / "rmm_format_log.csv").string());
  ASSERT_EQ(events.size(), 9U);
  EXPECT_EQ(events[0].thread, 48211U);
  EXPECT_EQ(events[0].time, "09:15:02.004117");
  EXPECT_EQ(events[0].time_us, ((9 * 60 + 15) * 60 + 2) * 1'000'000LL + 4117);
  EXPECT_EQ(events[0].action, log_action::allocate);
  EXPECT_EQ(events[0].pointer, 0x7f3a42000000U);
  EXPECT_EQ(events[0].size, 1048576U);
  EXPECT_EQ(events[0].stream, 0U);
  EXPECT_EQ(events[2].thread, 48230U);
  EXPECT_EQ(events[2].stream, 0x55d0c1e2a3b0U);
  EXPECT_EQ(events[3].action, log_action::allocate_failure);
  EXPECT_EQ(events[3].pointer, 0U);
  EXPECT_EQ(events[3].size, std::size_t{1} << 50);
  EXPECT_EQ(events[4].action, log_action::free);
  EXPECT_EQ(events[4].pointer, 0x7f3a42100000U);
  EXPECT_EQ(events[6].stream, 0x2U);
  EXPECT_EQ(events[7].time, "09:15:03.000003");
  EXPECT_EQ(events[8].size, 1048576U);
  // RMM's replay reads every Stream field in base 10: "0x..." is 0 there.
  EXPECT_EQ(rmm_replay_stream_value(events[2].stream_text), 0U);
}

TEST(logging_adaptor, ParserRejectsWhatRmmNeverWrites)
{
  std::string const header = "Thread,Time,Action,Pointer,Size,Stream\n";
  EXPECT_THROW(parse("Thread,Time,Action,Pointer,Size\n"), std::runtime_error);
  EXPECT_THROW(parse(header + "1,10:00:00.000000,allocate,0x10,8\n"), std::runtime_error);
  EXPECT_THROW(parse(header + "1,10:00:00.000000,alloc,0x10,8,0\n"), std::runtime_error);
  EXPECT_THROW(parse(header + "1,10:00:00.0000,allocate,0x10,8,0\n"), std::runtime_error);
  EXPECT_THROW(parse(header + "1,10:00:00.000000,allocate,0x10,8 ,0\n"), std::runtime_error);
  EXPECT_THROW(parse(header + "x1,10:00:00.000000,free,0x10,8,0\n"), std::runtime_error);
  EXPECT_EQ(parse(header + "1,10:00:00.000000,free,0x10,8,0\n").size(), 1U);
}

}  // namespace
}  // namespace rmm_next::test
