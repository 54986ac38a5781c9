// An outside program (CXX only) that uses loom through its installed public
// API. It throws nothing itself: each loom exception it catches was thrown
// inside libloom.so, so catching it by its own type checks that the type
// information crosses the shared library's boundary (hidden visibility
// everywhere else). Exits 0 when every check passes, with or without a GPU.
#include <loom/loom.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <future>
#include <iostream>
#include <string>
#include <typeinfo>

namespace {

int failures = 0;

// Runs `fn`, which must throw E from inside loom; anything else is a failure.
template <class E, class F>
void expect_thrown(const char* what, F&& fn) {
  try {
    fn();
    std::cout << "FAIL " << what << ": nothing was thrown\n";
  } catch (const E& e) {
    std::cout << "ok   " << what << ": caught " << typeid(E).name() << ": " << e.what() << "\n";
    return;
  } catch (const std::exception& e) {
    std::cout << "FAIL " << what << ": caught " << typeid(e).name() << " instead: " << e.what()
              << "\n";
  } catch (...) {
    std::cout << "FAIL " << what << ": caught something that is not a std::exception\n";
  }
  ++failures;
}

loom::RuntimeOptions cpu_backend() {
  loom::RuntimeOptions options;
  options.backend = loom::Backend::cpu;
  return options;
}

}  // namespace

int main() {
  std::cout << "consumer linked against loom " << loom::version() << "\n";
  const std::string headers = std::to_string(loom::kVersionMajor) + "." +
                              std::to_string(loom::kVersionMinor) + "." +
                              std::to_string(loom::kVersionPatch);
  if (loom::version() != headers) {
    std::cout << "FAIL the library is " << loom::version() << ", the headers " << headers << "\n";
    ++failures;
  }
  std::cout << loom::device_report();

  loom::Runtime rt(cpu_backend());

  expect_thrown<loom::InvalidArgument>("a copy between tensors of different shapes", [&] {
    rt.copy(rt.tensor<float>({4}), rt.tensor<float>({5})).wait();
  });
  expect_thrown<loom::Error>("the Error base, for a typed access of the wrong dtype",
                             [&] { (void)rt.tensor<float>({4}).data_as<std::int32_t>(); });
  expect_thrown<loom::OutOfMemory>("an allocation larger than any address space", [&] {
    (void)rt.tensor<float>({std::int64_t{1} << 57}, loom::Memory::pageable);
  });
  expect_thrown<loom::NoDevice>("device_properties(99)", [] { loom::device_properties(99); });
  expect_thrown<loom::NoDevice>("the CUDA backend on a device that does not exist", [] {
    loom::RuntimeOptions options;
    options.backend = loom::Backend::cuda;  // without a GPU: no device at all
    options.device = 99;                    // with one: not that many
    loom::Runtime cuda(options);
  });
  expect_thrown<loom::Cancelled>("waiting for a cancelled run", [&] {
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    auto t = rt.tensor<float>({1});
    loom::Graph g;
    g.host("blocked", [released] { released.wait(); }, {}, {t});
    g.host("after", [] {}, {t}, {});  // reads what "blocked" writes: runs after it
    auto run = rt.submit(g);
    run.cancel();
    release.set_value();
    run.wait();
  });

  std::cout << (failures == 0 ? "all checks passed\n" : "checks failed\n");
  return failures == 0 ? 0 : 1;
}
