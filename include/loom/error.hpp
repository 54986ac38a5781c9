#pragma once
/// @file error.hpp
/// The loom::Error hierarchy. Every failure loom reports is one of these: a
/// checked CUDA, NCCL or MPI call, bad input, exhausted memory, a cancelled
/// task, or a machine without a usable GPU. Each error carries the failing
/// call, the source file and line, and the name of the task it came from
/// when there is one.

#include <loom/export.hpp>

#include <cstddef>
#include <exception>
#include <string>
#include <string_view>
#include <utility>

namespace loom {

/// Where an error was raised: the call that failed, its source location and
/// the task that was running. Any field may be empty.
struct ErrorContext {
  std::string call;  ///< the checked expression, e.g. "cudaMalloc(&p, n)"
  std::string file;  ///< source file of the check
  int line = 0;      ///< source line of the check
  std::string task;  ///< name of the task that was running, if any
};

/// Base of every loom error.
///
/// what() reads "loom: task 'blur': cudaMemcpyAsync(...) failed: <message> [file:line]";
/// the parts are available separately. Thread-safe to read from any thread.
class LOOM_API Error : public std::exception {
 public:
  explicit Error(std::string message, ErrorContext context = {});

  const char* what() const noexcept override { return what_.c_str(); }
  /// The message without the context decoration.
  const std::string& message() const noexcept { return message_; }
  const std::string& call() const noexcept { return context_.call; }
  const std::string& file() const noexcept { return context_.file; }
  int line() const noexcept { return context_.line; }
  /// Name of the task the error came from; empty outside a task.
  const std::string& task() const noexcept { return context_.task; }
  const ErrorContext& context() const noexcept { return context_; }

  /// When the error reached task() from another task (a host task that
  /// waited on a run whose task failed, and rethrew its error), the task
  /// that raised it first; empty otherwise. what() then reads "loom: task
  /// 'b': because of task 'a': ...".
  const std::string& origin_task() const noexcept { return origin_task_; }

  /// This error as a failure of `task`: a new exception of the same dynamic
  /// type (a CudaError keeps its code, an OutOfMemory its size, ...) whose
  /// task() is `task`. This error is never changed: a stored error may be
  /// read by many threads, and rethrown into many tasks. An error that names
  /// another task already keeps that name as origin_task(). Subclasses
  /// override it to keep their type; one that does not (a user's subclass)
  /// becomes a plain loom::Error. @throws std::bad_alloc only.
  virtual std::exception_ptr with_task(std::string_view task) const;

 protected:
  /// For with_task's overrides: a copy of `self`, named `task`.
  template <class Self>
  static std::exception_ptr named_copy(const Self& self, std::string_view task) {
    Self copy(self);
    static_cast<Error&>(copy).name_task(task);
    return std::make_exception_ptr(std::move(copy));
  }

 private:
  void name_task(std::string_view task);
  void format();

  std::string message_;
  ErrorContext context_;
  std::string origin_task_;
  std::string what_;
};

/// A CUDA runtime call failed. code() is the cudaError_t value.
class LOOM_API CudaError : public Error {
 public:
  std::exception_ptr with_task(std::string_view task) const override {
    return named_copy(*this, task);
  }
  CudaError(int code, std::string message, ErrorContext context = {})
      : Error(std::move(message), std::move(context)), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

/// An NCCL call failed. code() is the ncclResult_t value.
class LOOM_API NcclError : public Error {
 public:
  std::exception_ptr with_task(std::string_view task) const override {
    return named_copy(*this, task);
  }
  NcclError(int code, std::string message, ErrorContext context = {})
      : Error(std::move(message), std::move(context)), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

/// An MPI call failed. code() is the MPI error code.
class LOOM_API MpiError : public Error {
 public:
  std::exception_ptr with_task(std::string_view task) const override {
    return named_copy(*this, task);
  }
  MpiError(int code, std::string message, ErrorContext context = {})
      : Error(std::move(message), std::move(context)), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

/// A collective failed across ranks: a rank did not reach it within the
/// communicator's timeout, or the ranks disagree on what it is (another
/// collective, size, dtype, root or reduction). Every rank that reached it
/// gets one, naming the collective's number and the ranks concerned.
class LOOM_API CommError : public Error {
 public:
  std::exception_ptr with_task(std::string_view task) const override {
    return named_copy(*this, task);
  }
  using Error::Error;
};

/// Bad input rejected before anything launched: the message says what was
/// expected and what was given.
class LOOM_API InvalidArgument : public Error {
 public:
  std::exception_ptr with_task(std::string_view task) const override {
    return named_copy(*this, task);
  }
  using Error::Error;
};

/// A memory resource could not satisfy a request. requested() is the size
/// in bytes (0 when unknown).
class LOOM_API OutOfMemory : public Error {
 public:
  std::exception_ptr with_task(std::string_view task) const override {
    return named_copy(*this, task);
  }
  OutOfMemory(std::size_t requested, std::string message, ErrorContext context = {})
      : Error(std::move(message), std::move(context)), requested_(requested) {}
  std::size_t requested() const noexcept { return requested_; }

 private:
  std::size_t requested_;
};

/// A task did not run because a task it depends on failed, or its run was
/// cancelled.
class LOOM_API Cancelled : public Error {
 public:
  std::exception_ptr with_task(std::string_view task) const override {
    return named_copy(*this, task);
  }
  using Error::Error;
};

/// No usable GPU: which of the reasons applies is in reason().
class LOOM_API NoDevice : public Error {
 public:
  std::exception_ptr with_task(std::string_view task) const override {
    return named_copy(*this, task);
  }
  enum class Reason {
    no_driver,            ///< no CUDA driver is installed (or it cannot be loaded)
    driver_too_old,       ///< the driver is older than the CUDA runtime loom was built with
    no_device,            ///< a driver is present but reports no CUDA device
    device_out_of_range,  ///< a device index beyond the devices present was asked for
  };
  NoDevice(Reason reason, std::string message, ErrorContext context = {})
      : Error(std::move(message), std::move(context)), reason_(reason) {}
  Reason reason() const noexcept { return reason_; }

 private:
  Reason reason_;
};

/// loom itself broke a promise it checks (a bug in loom, please report it).
class LOOM_API InternalError : public Error {
 public:
  std::exception_ptr with_task(std::string_view task) const override {
    return named_copy(*this, task);
  }
  using Error::Error;
};

}  // namespace loom
