// Uses loom through its installed public API only.
#include <loom/loom.hpp>

#include <iostream>

int main() {
  std::cout << "consumer linked against loom " << loom::version() << "\n";
  std::cout << loom::device_report();
  try {
    throw loom::InvalidArgument("expected a positive size");
  } catch (const loom::Error& e) {
    std::cout << "caught: " << e.what() << "\n";
  }
  return loom::version().empty() ? 1 : 0;
}
