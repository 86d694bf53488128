/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// A forked child of a GPU test (or of its helper process) that does some work with what it
// inherited and exits with `_exit`, its standard error read by the parent: a child must exit
// cleanly and print nothing (a release failure the library reports would print). No GoogleTest:
// the answer is a sentence.

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <string>

namespace rmm_next::test {

/**
 * @brief Forks; the child runs `work()`, which returns its exit status (0: as expected), and
 * `_exit`s with it (100 if `work` threw, 128 + the signal if it was killed, after 60 s at most).
 * @return "" when the child exited with status 0 and printed nothing on standard error, else what
 * happened, with what it printed.
 */
template <class Work>
std::string run_in_forked_child(Work&& work)
{
  int err[2]{-1, -1};
  if (::pipe(err) != 0) { return "pipe failed: errno " + std::to_string(errno); }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t const pid = ::fork();
  if (pid < 0) {
    ::close(err[0]);
    ::close(err[1]);
    return "fork failed: errno " + std::to_string(errno);
  }
  if (pid == 0) {
    ::alarm(60);  // a child that hangs (on a lock another thread held at the fork) dies
    ::dup2(err[1], 2);
    ::close(err[0]);
    ::close(err[1]);
    int code = 100;
    try {
      code = work();
    } catch (std::exception const& e) {
      std::fprintf(stderr, "the child threw: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "the child threw something that is not a std::exception\n");
    }
    ::_exit(code);
  }
  ::close(err[1]);
  std::string printed;
  char buffer[256];
  for (ssize_t n; (n = ::read(err[0], buffer, sizeof(buffer))) > 0 || (n < 0 && errno == EINTR);) {
    if (n > 0) { printed.append(buffer, static_cast<std::size_t>(n)); }
  }
  ::close(err[0]);
  int status{};
  pid_t r{};
  do {
    r = ::waitpid(pid, &status, 0);
  } while (r < 0 && errno == EINTR);
  std::string answer;
  if (r != pid) {
    answer = "waitpid failed: errno " + std::to_string(errno);
  } else if (WIFSIGNALED(status)) {
    answer = "the child was killed by signal " + std::to_string(WTERMSIG(status));
  } else if (WEXITSTATUS(status) != 0) {
    answer = "the child exited with status " + std::to_string(WEXITSTATUS(status));
  }
  if (!printed.empty()) {
    answer += (answer.empty() ? "" : "; ") + std::string{"the child printed: "} + printed;
  }
  return answer;
}

}  // namespace rmm_next::test
