#pragma once
// Running a test's body on P ranks of the local backend: one thread a rank,
// each with a Runtime of its own; every rank's failure (an exception or a
// gtest assertion) is reported.

#include <loom/comm.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace loom::test {

/// body(rank, comm, runtime) on one thread a rank, runtime = options' Runtime.
inline void on_ranks(const std::vector<std::shared_ptr<Communicator>>& comms,
                     const RuntimeOptions& options,
                     const std::function<void(int, Communicator&, Runtime&)>& body) {
  std::mutex m;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < comms.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        Runtime rt(options);
        body(static_cast<int>(r), *comms[r], rt);
      } catch (const std::exception& e) {
        const std::lock_guard lock(m);
        failures.push_back("rank " + std::to_string(r) + ": " + e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& f : failures) ADD_FAILURE() << f;
}

}  // namespace loom::test
