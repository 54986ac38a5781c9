#pragma once
// The check every op's tests make of bad input: the op, alone in a graph
// under the task name `task`, is refused at submit with InvalidArgument that
// names the task and says `words`.

#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include <string>

namespace loom::test {

inline void expect_rejected(Runtime& rt, const OpPtr& op, const std::string& words,
                            const std::string& task = "stage") {
  Graph g;
  g.add(op, {.name = task});
  try {
    (void)rt.submit(g);
    FAIL() << "accepted; expected a rejection saying '" << words << "'";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.task(), task) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

}  // namespace loom::test
