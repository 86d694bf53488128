/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>

#include <version>

#include <string>
#include <utility>

#if defined(__cpp_lib_stacktrace)
#include <stacktrace>
#else
#include <array>
#include <cstdlib>
#include <vector>
#if __has_include(<execinfo.h>)
#include <execinfo.h>
#define RMM_NEXT_HAS_EXECINFO 1
#endif
#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#endif
#endif

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/**
 * @brief The call stack at one moment, captured cheaply and turned into text only when asked.
 *
 * `std::stacktrace` where the standard library has it (C++23: with libstdc++ the program links
 * `-lstdc++exp`), otherwise glibc's `backtrace()`, whose names come from the dynamic symbol table
 * (link with `-rdynamic` to see a program's own functions; library functions are always named).
 * Elsewhere it captures nothing.
 */
class stack_trace {
 public:
  stack_trace() = default;

  /** @brief The stack of the caller (this function's own frame left out). */
  [[gnu::noinline]] static stack_trace capture()
  {
    stack_trace trace;
#if defined(__cpp_lib_stacktrace)
    trace.frames_ = std::stacktrace::current(1);
#elif defined(RMM_NEXT_HAS_EXECINFO)
    std::array<void*, max_frames> frames{};
    int const n = ::backtrace(frames.data(), static_cast<int>(frames.size()));
    if (n > 1) { trace.frames_.assign(frames.begin() + 1, frames.begin() + n); }
#endif
    return trace;
  }

  /** @brief One line per frame, `#<i> <where>`, innermost first; empty when nothing was captured.
   */
  [[nodiscard]] std::string to_string() const
  {
    std::string text;
#if defined(__cpp_lib_stacktrace)
    std::size_t i = 0;
    for (auto const& frame : frames_) {
      text.append("#").append(std::to_string(i++)).append(" ");
      text.append(std::to_string(frame)).append("\n");
    }
#elif defined(RMM_NEXT_HAS_EXECINFO)
    if (frames_.empty()) { return text; }
    char** symbols = ::backtrace_symbols(frames_.data(), static_cast<int>(frames_.size()));
    if (symbols == nullptr) { return text; }
    for (std::size_t i = 0; i < frames_.size(); ++i) {
      text.append("#").append(std::to_string(i)).append(" ");
      text.append(demangled(symbols[i])).append("\n");
    }
    std::free(symbols);  // NOLINT(cppcoreguidelines-no-malloc): backtrace_symbols' contract
#endif
    return text;
  }

 private:
#if defined(__cpp_lib_stacktrace)
  std::stacktrace frames_;
#else
  static constexpr std::size_t max_frames = 64;
  std::vector<void*> frames_;

  /** @brief `binary(_Z...+0x1f) [0x...]` with the mangled name demangled, when it is one. */
  static std::string demangled(char const* symbol)
  {
    std::string line{symbol};
#if __has_include(<cxxabi.h>)
    auto const open = line.find('(');
    auto const plus = line.find('+', open);
    if (open == std::string::npos || plus == std::string::npos || plus == open + 1) { return line; }
    std::string const mangled = line.substr(open + 1, plus - open - 1);
    int status                = 0;
    char* name                = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
    if (status == 0 && name != nullptr) { line.replace(open + 1, mangled.size(), name); }
    std::free(name);  // NOLINT(cppcoreguidelines-no-malloc): __cxa_demangle's contract
#endif
    return line;
  }
#endif
};

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
