/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// An application using mylib: first with mylib's defaults, then with its own memory for two of
// mylib's kinds on device 0 only (results in managed memory, temporaries from a pool of its own),
// then with the defaults again. Prints what each run used; exits 0 when every histogram is right,
// 77 without a usable CUDA device (a skipped test), 1 otherwise.
#include "gpu_check.hpp"
#include "mylib.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr int bins           = 10;
constexpr std::size_t values = 1'000'000;

void check(cudaError_t status, char const* what)
{
  if (status != cudaSuccess) {
    throw std::runtime_error{std::string{what} + ": " + cudaGetErrorString(status)};
  }
}

/** A non-blocking stream on the device current at construction. */
class stream {
 public:
  stream() { check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream"); }
  stream(stream const&)            = delete;
  stream& operator=(stream const&) = delete;
  ~stream() { (void)cudaStreamDestroy(stream_); }
  operator cudaStream_t() const noexcept { return stream_; }  // NOLINT(implicit)

 private:
  cudaStream_t stream_{};
};

/** Values spread evenly over [0, 1): each of the 10 bins gets a tenth of them. */
std::vector<float> make_values()
{
  std::vector<float> v(values);
  for (std::size_t i = 0; i < values; ++i) {
    v[i] = (static_cast<float>(i % 1000) + 0.5F) / 1000.0F;
  }
  return v;
}

/** Runs mylib::histogram on the current device, checks and prints what it returned. */
bool run(char const* label, std::vector<float> const& input)
{
  int device{};
  check(cudaGetDevice(&device), "cudaGetDevice");
  stream s;
  std::vector<unsigned int> counts(bins);
  char const* memory = "unknown memory";
  char const* read   = "";
  {
    auto result = mylib::histogram(input, bins, 0.0F, 1.0F, cuda::stream_ref{s});
    cudaPointerAttributes attrs{};
    check(cudaPointerGetAttributes(&attrs, result.data()), "cudaPointerGetAttributes");
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    if (attrs.type == cudaMemoryTypeManaged) {
      memory = "managed memory";
      read   = "read on the host directly";
      for (int b = 0; b < bins; ++b) {
        counts[static_cast<std::size_t>(b)] = result.data()[b];
      }
    } else {
      memory = attrs.type == cudaMemoryTypeDevice ? "device memory" : "host memory";
      read   = "copied to the host";
      check(
        cudaMemcpy(counts.data(), result.data(), bins * sizeof(unsigned int), cudaMemcpyDefault),
        "cudaMemcpy");
    }
  }
  // The result was freed in stream order: wait for it before its resource may go away.
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");

  bool ok = true;
  for (unsigned int c : counts) {
    ok = ok && c == values / bins;
  }
  std::printf("%-22s device %d: results in %s (%s), %s\n",
              label,
              device,
              memory,
              read,
              ok ? "all 10 bins hold 100000" : "WRONG COUNTS");
  return ok;
}

}  // namespace

int main()
{
  int const devices = rmm_next_test::require_devices();
  try {
    auto const input = make_values();
    check(cudaSetDevice(0), "cudaSetDevice");
    std::printf("mylib example on %d device(s)\n", devices);
    bool ok = run("mylib's defaults", input);

    {
      // The application's memory for mylib on device 0 only; other devices, other kinds and
      // other libraries keep theirs.
      rmm_next::async_device_resource scratch_pool{rmm_next::pool_options{}, 0};
      auto const previous_temporaries =
        mylib::resources().set(mylib::allocation_kind::temporaries, 0, scratch_pool);

      std::optional<rmm_next::async_managed_resource> managed;
      std::optional<rmm_next::device_async_resource_ref> previous_results;
      try {
        managed.emplace(rmm_next::current_pool{}, 0);
        previous_results = mylib::resources().set(mylib::allocation_kind::results, 0, *managed);
      } catch (rmm_next::not_supported const& e) {
        std::printf("results stay in mylib's default memory: %s\n", e.what());
      }

      ok              = run("application's memory", input) && ok;
      auto const high = scratch_pool.statistics().used_bytes_high;
      std::printf("%-22s temporaries: %llu bytes at most from the application's pool\n",
                  "",
                  static_cast<unsigned long long>(high));
      ok = ok && high >= values * sizeof(float);

      if (devices > 1) {
        check(cudaSetDevice(1), "cudaSetDevice");
        ok = run("device 1 untouched", input) && ok;
        check(cudaSetDevice(0), "cudaSetDevice");
      }

      // Undone before the application's resources go away.
      mylib::resources().set(mylib::allocation_kind::temporaries, 0, previous_temporaries);
      if (previous_results) {
        mylib::resources().set(mylib::allocation_kind::results, 0, *previous_results);
      }
    }

    ok = run("defaults again", input) && ok;
    std::printf("%s\n", ok ? "mylib example: ok" : "mylib example: FAILED");
    return ok ? 0 : 1;
  } catch (std::exception const& e) {
    std::printf("mylib example failed: %s\n", e.what());
    return 1;
  }
}
