/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#include <rmm_next/detail/device_queries.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/error_macros.hpp>

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <type_traits>

namespace {

static_assert(std::is_base_of_v<rmm_next::cuda_error, rmm_next::not_supported>);
static_assert(std::is_base_of_v<rmm_next::bad_alloc, rmm_next::out_of_memory>);
static_assert(std::is_base_of_v<std::bad_alloc, rmm_next::bad_alloc>);
static_assert(std::is_base_of_v<std::runtime_error, rmm_next::cuda_error>);
static_assert(std::is_base_of_v<std::logic_error, rmm_next::logic_error>);

TEST(CudaTry, ThrowsCudaErrorWithCallAndCodeAndClearsIt)
{
  try {
    RMM_NEXT_CUDA_TRY(cudaErrorInvalidValue);
    FAIL() << "no exception";
  } catch (rmm_next::cuda_error const& e) {
    EXPECT_EQ(e.code(), cudaErrorInvalidValue);
    std::string const what = e.what();
    EXPECT_NE(what.find("cudaErrorInvalidValue"), std::string::npos) << what;
    EXPECT_NE(what.find("rmm_next"), std::string::npos) << what;
  }
  // Without a driver the runtime reports that on every call; with one, nothing is left behind.
  int count{};
  if (cudaGetDeviceCount(&count) == cudaSuccess) { EXPECT_EQ(cudaGetLastError(), cudaSuccess); }
}

// The message names the CUDA function and the user's call, never rmm-next's source text.
TEST(CudaTry, NamesTheFunctionAndTheCallerNotTheSourceText)
{
  auto const message = [](auto&& throwing) {
    try {
      throwing();
    } catch (rmm_next::cuda_error const& e) {
      return std::string{e.what()};
    }
    return std::string{"no exception"};
  };
  auto const fails = [](int* out) {
    (void)out;
    return cudaErrorInvalidValue;
  };
  int value{};
  std::string const named =
    message([&] { RMM_NEXT_CUDA_TRY(fails(&value), "async_device_resource"); });
  EXPECT_EQ(named.rfind("rmm_next::async_device_resource: fails returned cudaErrorInvalidValue", 0),
            0u)
    << named;
  EXPECT_EQ(named.find("&value"), std::string::npos) << named;
  std::string const unnamed = message([&] { RMM_NEXT_CUDA_TRY(fails(&value)); });
  EXPECT_EQ(unnamed.rfind("rmm_next::cuda_error: fails returned", 0), 0u) << unnamed;
  EXPECT_EQ(unnamed.find("&value"), std::string::npos) << unnamed;
  static_assert(rmm_next::detail::function_name("cudaGetDevice(&device)") == "cudaGetDevice");
  static_assert(rmm_next::detail::function_name("cudaSuccess") == "cudaSuccess");
}

TEST(CudaTry, NotSupportedIsTyped)
{
  EXPECT_THROW(RMM_NEXT_CUDA_TRY(cudaErrorNotSupported), rmm_next::not_supported);
}

TEST(CudaTry, SuccessDoesNotThrow) { EXPECT_NO_THROW(RMM_NEXT_CUDA_TRY(cudaSuccess)); }

TEST(CudaTry, MissingDriverSaysSo)
{
  try {
    RMM_NEXT_CUDA_TRY(cudaErrorInsufficientDriver);
    FAIL() << "no exception";
  } catch (rmm_next::cuda_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("no usable CUDA driver or device: "), std::string::npos) << what;
    EXPECT_NE(what.find(rmm_next::detail::no_usable_device_reason(cudaErrorInsufficientDriver)),
              std::string::npos)
      << what;
    EXPECT_NE(what.find("; install or update the NVIDIA driver"), std::string::npos) << what;
  }
}

// cudaErrorInsufficientDriver means "no driver at all" as well as "a driver that is too old":
// cudaDriverGetVersion tells them apart (0 when no driver is installed).
TEST(CudaTry, NoDriverIsNotAnOldDriver)
{
  int driver{};
  ASSERT_EQ(cudaDriverGetVersion(&driver), cudaSuccess);
  std::string const reason = rmm_next::detail::no_usable_device_reason(cudaErrorInsufficientDriver);
  if (driver == 0) {
    EXPECT_EQ(reason, "no CUDA driver is installed");
  } else {
    EXPECT_NE(reason.find("the CUDA driver supports CUDA " +
                          rmm_next::detail::version_string(driver) + ", older than"),
              std::string::npos)
      << reason;
  }
  EXPECT_EQ(rmm_next::detail::no_usable_device_reason(cudaErrorNoDevice),
            "no CUDA device is visible");
  EXPECT_EQ(rmm_next::detail::no_usable_device_reason(cudaErrorInvalidValue), "");
}

/** True when `what` names a source file and line (of rmm-next or of the caller). */
bool names_a_source_line(std::string const& what)
{
  for (char const* suffix : {".hpp:", ".cpp:", ".cu:", ".h:"}) {
    if (what.find(suffix) != std::string::npos) { return true; }
  }
  return false;
}

TEST(ErrorMessages, NameTheCallNotAnInternalHeaderAndLine)
{
  // A CUDA failure inside rmm-next: the message names the CUDA call, not an rmm-next header and
  // line.
  try {
    (void)rmm_next::detail::device_attribute(cudaDevAttrMemoryPoolsSupported, -1);
    FAIL() << "no exception for device -1";
  } catch (rmm_next::cuda_error const& e) {
    std::string const what = e.what();
    EXPECT_FALSE(names_a_source_line(what)) << what;
    EXPECT_NE(what.find("cudaDeviceGetAttribute"), std::string::npos) << what;
    EXPECT_NE(what.find("rmm_next"), std::string::npos) << what;
  }
  try {
    RMM_NEXT_CUDA_TRY(cudaErrorInvalidValue);
    FAIL() << "no exception";
  } catch (rmm_next::cuda_error const& e) {
    EXPECT_FALSE(names_a_source_line(e.what())) << e.what();
  }
  // A broken precondition: rmm_next::<what>: <what happened>.
  try {
    RMM_NEXT_EXPECTS(false, "thing: went wrong");
    FAIL() << "no exception";
  } catch (rmm_next::logic_error const& e) {
    EXPECT_STREQ(e.what(), "rmm_next::thing: went wrong");
  }
}

TEST(Expects, ThrowsLogicErrorWithMessage)
{
  try {
    RMM_NEXT_EXPECTS(1 + 1 == 3, "arithmetic is broken");
    FAIL() << "no exception";
  } catch (rmm_next::logic_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("arithmetic is broken"), std::string::npos);
  }
  EXPECT_NO_THROW(RMM_NEXT_EXPECTS(true, "never"));
}

TEST(Expects, ThrowsRequestedType)
{
  EXPECT_THROW(RMM_NEXT_EXPECTS(false, "bad size", rmm_next::out_of_memory),
               rmm_next::out_of_memory);
}

TEST(Errors, CarryTheirMessages)
{
  EXPECT_STREQ(rmm_next::out_of_memory{"out_of_memory: 42"}.what(), "out_of_memory: 42");
  rmm_next::not_supported const ns{"feature X needs Y, found Z"};
  EXPECT_EQ(ns.code(), cudaErrorNotSupported);
  EXPECT_STREQ(ns.what(), "feature X needs Y, found Z");
}

TEST(VersionString, FormatsMajorMinor)
{
  EXPECT_EQ(rmm_next::detail::version_string(12060), "12.6");
  EXPECT_EQ(rmm_next::detail::version_string(13000), "13.0");
}

}  // namespace
