/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// allocator<T, Resource> and polymorphic_allocator<T, Properties...> meet the standard allocator
// requirements and route every allocation to their resource. Runs without a GPU: the resources
// here hand out host memory.
#include "support/fake_resource.hpp"

#include <rmm_next/allocator.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/polymorphic_allocator.hpp>
#include <rmm_next/resource_ref.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using rmm_next::test::fake_resource;

/**
 * A synchronous host resource of a second type that refuses allocations above `limit` bytes with
 * rmm_next::out_of_memory and records the alignment of each allocation; otherwise as its
 * fake_resource.
 */
class limited_resource {
 public:
  limited_resource(fake_resource upstream, std::size_t limit)
    : upstream_{std::move(upstream)},
      limit_{limit},
      last_alignment_{std::make_shared<std::size_t>()}
  {
  }

  [[nodiscard]] fake_resource const& upstream() const noexcept { return upstream_; }
  [[nodiscard]] std::size_t last_alignment() const noexcept { return *last_alignment_; }

  void* allocate_sync(std::size_t bytes, std::size_t alignment)
  {
    if (bytes > limit_) {
      throw rmm_next::out_of_memory{"rmm_next::out_of_memory: limited_resource refused " +
                                    std::to_string(bytes) + " bytes"};
    }
    *last_alignment_ = alignment;
    return upstream_.allocate_sync(bytes, alignment);
  }
  void deallocate_sync(void* ptr, std::size_t bytes, std::size_t alignment) noexcept
  {
    upstream_.deallocate_sync(ptr, bytes, alignment);
  }
  // CCCL 3.0 names of the same members.
  void* allocate(std::size_t bytes, std::size_t alignment)
  {
    return allocate_sync(bytes, alignment);
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t alignment) noexcept
  {
    deallocate_sync(ptr, bytes, alignment);
  }

  friend bool operator==(limited_resource const& lhs, limited_resource const& rhs) noexcept
  {
    return lhs.upstream_ == rhs.upstream_ && lhs.limit_ == rhs.limit_;
  }
  friend void get_property(limited_resource const&, cuda::mr::host_accessible) noexcept {}
  friend void get_property(limited_resource const&, cuda::mr::device_accessible) noexcept {}

 private:
  fake_resource upstream_;
  std::size_t limit_;
  std::shared_ptr<std::size_t> last_alignment_;
};

static_assert(
  rmm_next::detail::synchronous_resource_with<limited_resource, cuda::mr::host_accessible>);

struct alignas(256) over_aligned_for_new {
  unsigned char bytes[256];
};
struct alignas(512) too_aligned {
  unsigned char bytes[512];
};

template <class T>
using fake_allocator = rmm_next::allocator<T, fake_resource>;

using host_alloc        = rmm_next::host_polymorphic_allocator<int>;
using host_device_alloc = rmm_next::host_device_polymorphic_allocator<int>;

// ---- Allocator requirements, checked through std::allocator_traits
// -------------------------------

template <class Alloc, class Rebound>
constexpr bool meets_traits()
{
  using traits = std::allocator_traits<Alloc>;
  static_assert(std::is_same_v<typename traits::value_type, int>);
  static_assert(std::is_same_v<typename traits::pointer, int*>);
  static_assert(std::is_same_v<typename traits::const_pointer, int const*>);
  static_assert(std::is_same_v<typename traits::void_pointer, void*>);
  static_assert(std::is_same_v<typename traits::size_type, std::size_t>);
  static_assert(std::is_same_v<typename traits::difference_type, std::ptrdiff_t>);
  static_assert(std::is_same_v<typename traits::template rebind_alloc<double>, Rebound>);
  static_assert(traits::propagate_on_container_copy_assignment::value);
  static_assert(traits::propagate_on_container_move_assignment::value);
  static_assert(traits::propagate_on_container_swap::value);
  static_assert(!traits::is_always_equal::value);
  static_assert(std::is_nothrow_copy_constructible_v<Alloc>);
  static_assert(std::is_nothrow_move_constructible_v<Alloc>);
  static_assert(std::is_copy_assignable_v<Alloc>);
  static_assert(std::is_nothrow_constructible_v<Alloc, Rebound const&>);  // rebind conversion
  static_assert(std::is_nothrow_constructible_v<Rebound, Alloc const&>);
  static_assert(noexcept(std::declval<Alloc&>().deallocate(nullptr, 1)));
  static_assert(
    std::is_same_v<decltype(std::declval<Alloc const&>() == std::declval<Rebound const&>()), bool>);
  static_assert(
    std::is_same_v<decltype(std::declval<Alloc const&>() != std::declval<Alloc const&>()), bool>);
  return true;
}

static_assert(meets_traits<fake_allocator<int>, fake_allocator<double>>());
static_assert(meets_traits<host_alloc, rmm_next::host_polymorphic_allocator<double>>());
static_assert(
  meets_traits<host_device_alloc, rmm_next::host_device_polymorphic_allocator<double>>());

// Default-constructible exactly when the resource is; the polymorphic one needs a resource.
static_assert(std::is_default_constructible_v<fake_allocator<int>>);
static_assert(!std::is_default_constructible_v<rmm_next::allocator<int, limited_resource>>);
static_assert(!std::is_default_constructible_v<host_alloc>);
// A resource converts implicitly (containers take `Allocator const&`); temporaries do not bind to
// the non-owning polymorphic allocator.
static_assert(std::is_convertible_v<fake_resource const&, fake_allocator<int>>);
static_assert(std::is_convertible_v<fake_resource&, host_alloc>);
static_assert(!std::is_constructible_v<host_alloc, fake_resource&&>);
// Properties are checked: a host-only allocator does not bind to a device-only ref.
static_assert(std::is_constructible_v<host_alloc, rmm_next::host_device_resource_ref>);
static_assert(!std::is_constructible_v<host_alloc, rmm_next::device_resource_ref>);
static_assert(!std::is_constructible_v<host_device_alloc, rmm_next::host_resource_ref>);
// Allocators of different resource types (or properties) are different types and never mix.
static_assert(
  !std::is_constructible_v<fake_allocator<int>, rmm_next::allocator<int, limited_resource>>);
// Over-aligned types are refused at compile time; 256 is the most the resources guarantee.
static_assert(rmm_next::detail::is_allocatable_alignment<over_aligned_for_new>);
static_assert(!rmm_next::detail::is_allocatable_alignment<too_aligned>);

// ---- allocator<T, Resource>
// ------------------------------------------------------------------------

// A type holding containers of itself: std::vector, std::list and std::forward_list accept an
// element type that is still incomplete, and so must their allocator (as std::allocator does).
struct tree {
  int value{};
  std::vector<tree, fake_allocator<tree>> children;
  std::list<tree, rmm_next::host_polymorphic_allocator<tree>>* siblings{};
};
static_assert(std::is_same_v<std::allocator_traits<fake_allocator<tree>>::value_type, tree>);

TEST(Allocator, ElementTypeMayBeIncomplete)
{
  fake_resource resource;
  tree root{1, std::vector<tree, fake_allocator<tree>>{fake_allocator<tree>{resource}}};
  root.children.push_back(tree{2, std::vector<tree, fake_allocator<tree>>{resource}});
  root.children.push_back(tree{3, std::vector<tree, fake_allocator<tree>>{resource}});
  root.children[0].children.push_back(tree{4, std::vector<tree, fake_allocator<tree>>{resource}});
  EXPECT_EQ(root.children[0].children[0].value, 4);
  EXPECT_GE(resource.allocations(), 3);

  std::list<tree, rmm_next::host_polymorphic_allocator<tree>> siblings{
    rmm_next::host_polymorphic_allocator<tree>{resource}};
  siblings.push_back(tree{5, std::vector<tree, fake_allocator<tree>>{resource}});
  root.siblings = &siblings;
  EXPECT_EQ(root.siblings->front().value, 5);
}

TEST(Allocator, AllocatesFromItsResource)
{
  fake_resource resource;
  fake_allocator<int> alloc{resource};
  int* p = alloc.allocate(100);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % alignof(int), 0U);
  for (int i = 0; i < 100; ++i) {
    p[i] = i;
  }
  EXPECT_EQ(p[99], 99);
  EXPECT_EQ(resource.allocations(), 1);
  alloc.deallocate(p, 100);
  EXPECT_EQ(resource.deallocations(), 1);
}

TEST(Allocator, PassesAlignofT)
{
  limited_resource resource{fake_resource{}, 1 << 20};
  rmm_next::allocator<over_aligned_for_new, limited_resource> alloc{resource};
  over_aligned_for_new* p = alloc.allocate(3);
  EXPECT_EQ(resource.last_alignment(), 256U);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 256, 0U);
  alloc.deallocate(p, 3);

  rmm_next::allocator<double, limited_resource> doubles{resource};
  doubles.deallocate(doubles.allocate(1), 1);
  EXPECT_EQ(resource.last_alignment(), alignof(double));
}

TEST(Allocator, ZeroElementsAsksTheResourceForZeroBytes)
{
  fake_resource resource;
  fake_allocator<int> alloc{resource};
  EXPECT_EQ(alloc.allocate(0), nullptr);  // fake_resource, like the async ones: 0 bytes -> null
  alloc.deallocate(nullptr, 0);
  EXPECT_EQ(resource.allocations(), 0);
  EXPECT_EQ(resource.deallocations(), 0);
}

TEST(Allocator, OverflowingSizeThrowsBadArrayNewLength)
{
  fake_resource resource;
  fake_allocator<std::uint64_t> alloc{resource};
  std::size_t const too_many = std::numeric_limits<std::size_t>::max() / sizeof(std::uint64_t) + 1;
  EXPECT_THROW((void)alloc.allocate(too_many), std::bad_array_new_length);
  EXPECT_THROW((void)alloc.allocate(std::numeric_limits<std::size_t>::max()),
               std::bad_array_new_length);
  EXPECT_EQ(resource.allocations(), 0);
}

TEST(Allocator, ResourceErrorsPropagate)
{
  limited_resource resource{fake_resource{}, 1024};
  rmm_next::allocator<int, limited_resource> alloc{resource};
  try {
    (void)alloc.allocate(1000);  // 4000 bytes
    FAIL() << "expected rmm_next::out_of_memory";
  } catch (rmm_next::out_of_memory const& e) {
    EXPECT_NE(std::string{e.what()}.find("4000 bytes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(resource.upstream().allocations(), 0);
}

TEST(Allocator, CopiesAndRebindsShareTheResource)
{
  fake_resource resource;
  fake_allocator<int> alloc{resource};
  fake_allocator<int> copy = alloc;
  fake_allocator<double> rebound{alloc};

  EXPECT_TRUE(copy == alloc);
  EXPECT_TRUE(rebound == alloc);
  EXPECT_TRUE(alloc == rebound);
  EXPECT_TRUE(rebound.resource() == resource);

  // Memory from one is freed by the other: they allocate from one resource.
  int* p = copy.allocate(4);
  alloc.deallocate(p, 4);
  double* d = rebound.allocate(2);
  fake_allocator<double>{copy}.deallocate(d, 2);
  EXPECT_EQ(resource.allocations(), 2);
  EXPECT_EQ(resource.deallocations(), 2);
}

TEST(Allocator, MovedFromAllocatorStaysUsableAndEqual)
{
  fake_resource resource;
  fake_allocator<int> alloc{resource};
  fake_allocator<int> moved{std::move(alloc)};
  EXPECT_TRUE(alloc == moved);  // NOLINT(bugprone-use-after-move): required by the allocator rules
  alloc.deallocate(alloc.allocate(1), 1);
  EXPECT_EQ(resource.allocations(), 1);

  host_alloc poly{resource};
  host_alloc poly_moved{std::move(poly)};
  EXPECT_TRUE(poly == poly_moved);  // NOLINT(bugprone-use-after-move)
  poly.deallocate(poly.allocate(1), 1);
  EXPECT_EQ(resource.allocations(), 2);
  EXPECT_EQ(resource.deallocations(), 2);
}

TEST(Allocator, EqualExactlyWhenResourcesAreEqual)
{
  fake_resource first{1};
  fake_resource second{2};
  fake_resource first_copy = first;
  EXPECT_TRUE(fake_allocator<int>{first} == fake_allocator<int>{first_copy});
  EXPECT_FALSE(fake_allocator<int>{first} == fake_allocator<int>{second});
  EXPECT_TRUE(fake_allocator<int>{first} != fake_allocator<float>{second});
}

TEST(Allocator, KeepsItsResourceAlive)
{
  std::weak_ptr<fake_resource::counters const> lifetime;
  std::vector<int, fake_allocator<int>> v{fake_allocator<int>{[&] {
    fake_resource temporary;
    lifetime = temporary.lifetime();
    return temporary;
  }()}};
  v.assign(10, 7);
  EXPECT_FALSE(lifetime.expired());  // the allocator's copy keeps the resource alive
  EXPECT_EQ(v.get_allocator().resource().allocations(), 1);
  v = std::vector<int, fake_allocator<int>>{fake_allocator<int>{fake_resource{}}};
  EXPECT_TRUE(lifetime.expired());  // propagated away and freed: the last copy is gone
}

TEST(Allocator, VectorAllocatesEveryGrowthFromTheResource)
{
  fake_resource resource;
  {
    std::vector<int, fake_allocator<int>> v{resource};
    for (int i = 0; i < 1000; ++i) {
      v.push_back(i * 3);
    }
    for (int i = 0; i < 1000; ++i) {
      ASSERT_EQ(v[i], i * 3);
    }
    EXPECT_GE(resource.allocations(), 2);  // grew at least once
    EXPECT_EQ(resource.allocations() - resource.deallocations(), 1);
    EXPECT_TRUE(v.get_allocator().resource() == resource);
  }
  EXPECT_EQ(resource.allocations(), resource.deallocations());
}

TEST(Allocator, ListAndMapRebindToTheirNodes)
{
  fake_resource resource;
  {
    std::list<int, fake_allocator<int>> list{resource};
    for (int i = 0; i < 10; ++i) {
      list.push_back(i);
    }
    EXPECT_EQ(resource.allocations(), 10);  // one node each
    EXPECT_EQ(list.back(), 9);

    using map_alloc = fake_allocator<std::pair<int const, std::string>>;
    std::map<int, std::string, std::less<>, map_alloc> map{map_alloc{resource}};
    map.emplace(2, "two");
    map.emplace(1, "one");
    EXPECT_EQ(resource.allocations(), 12);
    EXPECT_EQ(map.begin()->second, "one");
    map.erase(1);
    EXPECT_EQ(resource.deallocations(), 1);
  }
  EXPECT_EQ(resource.allocations(), resource.deallocations());
}

TEST(Allocator, ContainersTakeTheAllocatorAlong)
{
  fake_resource first{1};
  fake_resource second{2};
  {
    std::vector<int, fake_allocator<int>> a({1, 2, 3}, first);
    std::vector<int, fake_allocator<int>> b({4, 5}, second);

    a = b;  // copy assignment propagates: a now lives in `second`, its old memory went back
    EXPECT_TRUE(a.get_allocator().resource() == second);
    EXPECT_EQ(first.allocations(), 1);
    EXPECT_EQ(first.deallocations(), 1);
    EXPECT_EQ(second.allocations(), 2);
    EXPECT_EQ(a[0], 4);
    EXPECT_EQ(a[1], 5);

    std::vector<int, fake_allocator<int>> c({6}, first);
    c.swap(a);  // swap exchanges the allocators with the memory
    EXPECT_TRUE(c.get_allocator().resource() == second);
    EXPECT_TRUE(a.get_allocator().resource() == first);
    EXPECT_EQ(c[1], 5);

    b = std::move(a);  // move assignment takes the memory and its allocator
    EXPECT_TRUE(b.get_allocator().resource() == first);
    EXPECT_EQ(b[0], 6);
  }
  EXPECT_EQ(first.allocations(), first.deallocations());
  EXPECT_EQ(second.allocations(), second.deallocations());
}

TEST(Allocator, ContainerStaysIntactWhenGrowthFails)
{
  limited_resource resource{fake_resource{}, 64 * sizeof(int)};
  std::vector<int, rmm_next::allocator<int, limited_resource>> v{resource};
  v.assign(64, 5);
  EXPECT_THROW(v.reserve(65), rmm_next::out_of_memory);
  EXPECT_EQ(v.size(), 64U);
  EXPECT_EQ(v[63], 5);
}

// ---- polymorphic_allocator<T, Properties...>
// -------------------------------------------------------

TEST(PolymorphicAllocator, BindsToResourcesWithTheProperties)
{
  fake_resource resource;
  rmm_next::polymorphic_allocator<int, cuda::mr::host_accessible> host{resource};
  rmm_next::polymorphic_allocator<int, cuda::mr::device_accessible> device{resource};
  rmm_next::polymorphic_allocator<int, cuda::mr::host_accessible, cuda::mr::device_accessible>
    host_device{resource};
  rmm_next::polymorphic_allocator<int, cuda::mr::device_accessible, cuda::mr::host_accessible>
    device_host{resource};

  int* a = host.allocate(1);
  int* b = device.allocate(2);
  int* c = host_device.allocate(3);
  int* d = device_host.allocate(4);
  EXPECT_EQ(resource.allocations(), 4);
  host.deallocate(a, 1);
  device.deallocate(b, 2);
  host_device.deallocate(c, 3);
  device_host.deallocate(d, 4);
  EXPECT_EQ(resource.deallocations(), 4);
}

TEST(PolymorphicAllocator, BuiltFromRefsOfSeveralPropertySets)
{
  fake_resource resource;
  rmm_next::host_device_resource_ref host_device_ref{resource};
  rmm_next::host_resource_ref host_ref{resource};
  rmm_next::host_device_async_resource_ref async_ref{resource};

  std::vector<host_alloc> allocs{
    host_alloc{host_ref}, host_alloc{host_device_ref}, host_alloc{async_ref}, host_alloc{resource}};
  for (auto& alloc : allocs) {
    int* p = alloc.allocate(8);
    p[7]   = 42;
    EXPECT_EQ(p[7], 42);
    alloc.deallocate(p, 8);
    EXPECT_TRUE(alloc == allocs.front());  // all refer to one resource
  }
  EXPECT_EQ(resource.allocations(), 4);
  EXPECT_EQ(resource.deallocations(), 4);

  host_device_alloc from_ref{host_device_ref};
  from_ref.deallocate(from_ref.allocate(1), 1);
  EXPECT_EQ(resource.allocations(), 5);
}

TEST(PolymorphicAllocator, OneTypeOverDifferentResourceTypes)
{
  fake_resource fake;
  limited_resource limited{fake_resource{}, 1 << 20};
  using vector = std::vector<int, host_device_alloc>;  // names no resource type
  {
    vector a({1, 2, 3}, host_device_alloc{fake});
    vector b({4, 5, 6}, host_device_alloc{limited});
    EXPECT_EQ(fake.allocations(), 1);
    EXPECT_EQ(limited.upstream().allocations(), 1);
    EXPECT_EQ(limited.last_alignment(), alignof(int));
    EXPECT_FALSE(a.get_allocator() == b.get_allocator());

    a.swap(b);  // the memory and its allocator move together
    EXPECT_EQ(a[0], 4);
    EXPECT_EQ(b[2], 3);
    EXPECT_TRUE(a.get_allocator() == host_device_alloc{limited});
    EXPECT_TRUE(b.get_allocator() == host_device_alloc{fake});
  }
  EXPECT_EQ(fake.deallocations(), 1);
  EXPECT_EQ(limited.upstream().deallocations(), 1);
}

TEST(PolymorphicAllocator, EqualExactlyWhenResourcesAreEqual)
{
  fake_resource first{1};
  fake_resource first_copy = first;
  fake_resource second{2};
  EXPECT_TRUE(host_alloc{first} == host_alloc{first_copy});  // distinct objects, equal resources
  EXPECT_FALSE(host_alloc{first} == host_alloc{second});
  EXPECT_TRUE(host_alloc{first} == rmm_next::host_polymorphic_allocator<double>{first});
  EXPECT_TRUE(host_alloc{first} != rmm_next::host_polymorphic_allocator<double>{second});
}

TEST(PolymorphicAllocator, CopiesAndRebindsShareTheResource)
{
  fake_resource resource;
  host_alloc alloc{resource};
  host_alloc copy = alloc;
  rmm_next::host_polymorphic_allocator<double> rebound{alloc};
  EXPECT_TRUE(copy == alloc);
  EXPECT_TRUE(rebound == alloc);

  double* d = rebound.allocate(5);
  rmm_next::host_polymorphic_allocator<double>{copy}.deallocate(d, 5);
  rmm_next::host_resource_ref ref = alloc.resource();
  ref.deallocate_sync(ref.allocate_sync(16, 16), 16, 16);
  EXPECT_EQ(resource.allocations(), 2);
  EXPECT_EQ(resource.deallocations(), 2);
}

TEST(PolymorphicAllocator, OverflowAndResourceErrors)
{
  limited_resource resource{fake_resource{}, 1024};
  rmm_next::host_polymorphic_allocator<std::uint32_t> alloc{resource};
  EXPECT_THROW((void)alloc.allocate(std::numeric_limits<std::size_t>::max() / 2),
               std::bad_array_new_length);
  EXPECT_THROW((void)alloc.allocate(1024), rmm_next::out_of_memory);
  EXPECT_EQ(resource.upstream().allocations(), 0);
  std::uint32_t* p = alloc.allocate(256);  // exactly the limit
  EXPECT_EQ(resource.last_alignment(), alignof(std::uint32_t));
  alloc.deallocate(p, 256);
}

TEST(PolymorphicAllocator, ListAndMap)
{
  fake_resource resource;
  {
    std::list<std::string, rmm_next::host_polymorphic_allocator<std::string>> list{
      rmm_next::host_polymorphic_allocator<std::string>{resource}};
    list.emplace_back("a");
    list.emplace_front("b");
    EXPECT_EQ(list.front(), "b");
    EXPECT_EQ(resource.allocations(), 2);

    using map_alloc = rmm_next::host_polymorphic_allocator<std::pair<int const, int>>;
    std::map<int, int, std::less<>, map_alloc> map{map_alloc{resource}};
    for (int i = 0; i < 5; ++i) {
      map[i] = i * i;
    }
    EXPECT_EQ(map.at(4), 16);
    EXPECT_EQ(resource.allocations(), 7);
  }
  EXPECT_EQ(resource.allocations(), resource.deallocations());
}

}  // namespace
