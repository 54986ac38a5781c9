#include "memory/upstream.hpp"

#include <new>

namespace loom::detail {
namespace {

constexpr std::align_val_t kAlignment{256};

class HostUpstream final : public Upstream {
 public:
  void* allocate(std::size_t bytes) override {
    return ::operator new(bytes, kAlignment, std::nothrow);
  }
  void deallocate(void* p, std::size_t /*bytes*/) noexcept override {
    ::operator delete(p, kAlignment);
  }
  std::string name() const override { return "host"; }
};

}  // namespace

std::unique_ptr<Upstream> make_host_upstream() { return std::make_unique<HostUpstream>(); }

}  // namespace loom::detail
