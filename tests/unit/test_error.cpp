// The error hierarchy and the one checking path for CUDA, NCCL (and MPI, in
// tests/mpi). None of this needs a GPU: the checks are fed result codes.
#include "comm/nccl_check.hpp"
#include "core/task_context.hpp"
#include "core/thread_role.hpp"
#include "cuda/check.hpp"

#include <loom/error.hpp>

#include <gtest/gtest.h>

#include <string>

namespace {

using loom::detail::TaskScope;

TEST(Error, WhatCarriesCallTaskFileAndLine) {
  const loom::Error e("it broke", {"do_thing(1)", "src/x.cpp", 42, "blur"});
  EXPECT_STREQ(e.what(), "loom: task 'blur': do_thing(1) failed: it broke [src/x.cpp:42]");
  EXPECT_EQ(e.message(), "it broke");
  EXPECT_EQ(e.call(), "do_thing(1)");
  EXPECT_EQ(e.file(), "src/x.cpp");
  EXPECT_EQ(e.line(), 42);
  EXPECT_EQ(e.task(), "blur");
}

TEST(Error, WhatWithoutContextIsJustTheMessage) {
  const loom::InvalidArgument e("expected a 3-d tensor, got 2-d");
  EXPECT_STREQ(e.what(), "loom: expected a 3-d tensor, got 2-d");
  EXPECT_TRUE(e.task().empty());
}

// Errors are values: naming a task makes a new error of the same type, and
// the one named stays as it was (it may be stored in a Future, read by many).
TEST(Error, WithTaskMakesANewErrorOfTheSameTypeAndLeavesTheOriginal) {
  const loom::CudaError cuda(700, "illegal address", {"cudaMemcpy", "x.cpp", 7, ""});
  try {
    std::rethrow_exception(cuda.with_task("blur"));
  } catch (const loom::CudaError& e) {
    EXPECT_EQ(e.code(), 700);
    EXPECT_EQ(e.task(), "blur");
    EXPECT_EQ(e.call(), "cudaMemcpy");
    EXPECT_EQ(e.line(), 7);
    EXPECT_STREQ(e.what(), "loom: task 'blur': cudaMemcpy failed: illegal address [x.cpp:7]");
  }
  EXPECT_TRUE(cuda.task().empty()) << "the original is unchanged";
  EXPECT_STREQ(cuda.what(), "loom: cudaMemcpy failed: illegal address [x.cpp:7]");

  const loom::OutOfMemory oom(1 << 20, "pool exhausted");
  EXPECT_THROW(std::rethrow_exception(oom.with_task("t")), loom::OutOfMemory);
  try {
    std::rethrow_exception(oom.with_task("t"));
  } catch (const loom::OutOfMemory& e) {
    EXPECT_EQ(e.requested(), std::size_t{1} << 20);
  }
  const loom::NoDevice none(loom::NoDevice::Reason::driver_too_old, "old");
  try {
    std::rethrow_exception(none.with_task("t"));
  } catch (const loom::NoDevice& e) {
    EXPECT_EQ(e.reason(), loom::NoDevice::Reason::driver_too_old);
  }
  EXPECT_THROW(std::rethrow_exception(loom::NcclError(3, "x").with_task("t")), loom::NcclError);
  EXPECT_THROW(std::rethrow_exception(loom::MpiError(4, "x").with_task("t")), loom::MpiError);
  EXPECT_THROW(std::rethrow_exception(loom::InvalidArgument("x").with_task("t")),
               loom::InvalidArgument);
  EXPECT_THROW(std::rethrow_exception(loom::Cancelled("x").with_task("t")), loom::Cancelled);
  EXPECT_THROW(std::rethrow_exception(loom::InternalError("x").with_task("t")),
               loom::InternalError);
  // A user's subclass that does not override with_task stays a loom::Error.
  struct Mine : loom::Error {
    using loom::Error::Error;
  };
  try {
    std::rethrow_exception(Mine("mine").with_task("t"));
  } catch (const loom::Error& e) {
    EXPECT_EQ(e.task(), "t");
    EXPECT_EQ(e.message(), "mine");
  }
}

// An error that names a task already, rethrown into another (a host task
// that waited on a failed run), says both: where it failed, and because of
// which task.
TEST(Error, WithTaskOnANamedErrorKeepsTheFirstTaskAsTheOrigin) {
  const loom::Error a("boom", {"", "", 0, "a"});
  try {
    std::rethrow_exception(a.with_task("b"));
  } catch (const loom::Error& b) {
    EXPECT_EQ(b.task(), "b");
    EXPECT_EQ(b.origin_task(), "a");
    EXPECT_STREQ(b.what(), "loom: task 'b': because of task 'a': boom");
    try {
      std::rethrow_exception(b.with_task("c"));
    } catch (const loom::Error& c) {
      EXPECT_EQ(c.origin_task(), "a") << "the first task is where it came from";
      EXPECT_STREQ(c.what(), "loom: task 'c': because of task 'a': boom");
    }
  }
  EXPECT_EQ(a.task(), "a");
  EXPECT_TRUE(a.origin_task().empty());
  try {
    std::rethrow_exception(a.with_task("a"));
  } catch (const loom::Error& same) {
    EXPECT_STREQ(same.what(), "loom: task 'a': boom") << "its own name changes nothing";
  }
}

TEST(Error, EveryKindIsALoomErrorAndAStdException) {
  const auto is_loom_error = [](auto&& thrower) {
    try {
      thrower();
    } catch (const loom::Error&) {
      return true;
    } catch (...) {
      return false;
    }
    return false;
  };
  EXPECT_TRUE(is_loom_error([] { throw loom::CudaError(2, "x"); }));
  EXPECT_TRUE(is_loom_error([] { throw loom::NcclError(3, "x"); }));
  EXPECT_TRUE(is_loom_error([] { throw loom::MpiError(4, "x"); }));
  EXPECT_TRUE(is_loom_error([] { throw loom::InvalidArgument("x"); }));
  EXPECT_TRUE(is_loom_error([] { throw loom::OutOfMemory(8, "x"); }));
  EXPECT_TRUE(is_loom_error([] { throw loom::Cancelled("x"); }));
  EXPECT_TRUE(is_loom_error([] { throw loom::NoDevice(loom::NoDevice::Reason::no_driver, "x"); }));
  EXPECT_TRUE(is_loom_error([] { throw loom::InternalError("x"); }));
  static_assert(std::is_base_of_v<std::exception, loom::Error>);
}

TEST(CudaCheck, SuccessDoesNothing) { EXPECT_NO_THROW(LOOM_CUDA_CHECK(cudaSuccess)); }

TEST(CudaCheck, FailureNamesCallFileLineAndTask) {
  const TaskScope scope("rgb_to_gray");
  try {
    LOOM_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "expected a throw";
  } catch (const loom::CudaError& e) {
    EXPECT_EQ(e.code(), static_cast<int>(cudaErrorInvalidValue));
    EXPECT_EQ(e.call(), "cudaErrorInvalidValue");
    EXPECT_EQ(e.task(), "rgb_to_gray");
    EXPECT_NE(e.file().find("test_error.cpp"), std::string::npos);
    EXPECT_GT(e.line(), 0);
    EXPECT_NE(std::string(e.what()).find("cudaErrorInvalidValue"), std::string::npos);
  }
}

TEST(CudaCheck, EvaluatesItsArgumentOnce) {
  int calls = 0;
  const auto call = [&calls] {
    ++calls;
    return cudaErrorInvalidValue;
  };
  EXPECT_THROW(LOOM_CUDA_CHECK(call()), loom::CudaError);
  EXPECT_EQ(calls, 1);
}

TEST(CudaCheck, OutOfMemoryAndMissingDevicesHaveTheirOwnTypes) {
  EXPECT_THROW(LOOM_CUDA_CHECK(cudaErrorMemoryAllocation), loom::OutOfMemory);
  try {
    LOOM_CUDA_CHECK(cudaErrorNoDevice);
    FAIL();
  } catch (const loom::NoDevice& e) {
    EXPECT_EQ(e.reason(), loom::NoDevice::Reason::no_device);
  }
  try {
    LOOM_CUDA_CHECK(cudaErrorInsufficientDriver);
    FAIL();
  } catch (const loom::NoDevice& e) {
    EXPECT_EQ(e.reason(), loom::NoDevice::Reason::driver_too_old);
  }
}

TEST(CudaCheck, AssertFormLogsAndNeverThrows) {
  bool ok = true;
  EXPECT_NO_THROW(ok = LOOM_CUDA_ASSERT(cudaErrorInvalidValue));
  EXPECT_FALSE(ok);
  EXPECT_TRUE(LOOM_CUDA_ASSERT(cudaSuccess));
}

TEST(TaskScope, NestsAndRestores) {
  EXPECT_TRUE(loom::detail::current_task().empty());
  {
    const TaskScope outer("outer");
    EXPECT_EQ(loom::detail::current_task(), "outer");
    {
      const TaskScope inner("inner");
      EXPECT_EQ(loom::detail::current_task(), "inner");
    }
    EXPECT_EQ(loom::detail::current_task(), "outer");
  }
  EXPECT_TRUE(loom::detail::current_task().empty());
}

// A thread that must not wait (loom's scheduling thread, where an op's
// run_cuda and a kernel task's launcher run inside a TaskScope): the refusal
// names the task, by the one path every blocking call shares.
TEST(TaskScope, ARefusedWaitNamesTheTask) {
  struct NeverWaits final : loom::detail::ThreadRole {
    void begin_blocking() override {}
    void end_blocking() noexcept override {}
    const char* cannot_wait() const noexcept override { return "it would never end"; }
  } role;
  const loom::detail::ThreadRoleScope as(&role);
  const TaskScope scope("launch blur");
  try {
    loom::detail::check_may_wait("Future::wait()");
    FAIL() << "waiting was allowed";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "launch blur");
    EXPECT_STREQ(e.what(), "loom: task 'launch blur': Future::wait(): it would never end");
  }
}

TEST(NcclCheck, FailureBecomesNcclErrorWithTask) {
  const TaskScope scope("all_reduce grads");
  try {
    LOOM_NCCL_CHECK(ncclInvalidArgument);
    FAIL() << "expected a throw";
  } catch (const loom::NcclError& e) {
    EXPECT_EQ(e.code(), static_cast<int>(ncclInvalidArgument));
    EXPECT_EQ(e.task(), "all_reduce grads");
    EXPECT_EQ(e.call(), "ncclInvalidArgument");
  }
  EXPECT_NO_THROW(LOOM_NCCL_CHECK(ncclSuccess));
}

}  // namespace
