// Runs flash_attention and flash_attention_backward through the public API
// on inputs read from raw files, and writes the results beside them, so that
// bench/torch_attention_check.py can hold loom against PyTorch's
// scaled_dot_product_attention on the very same inputs.
//   attention_files DIR B H SQ SK D bf16|f16 causal(0|1) [cpu]
// Reads DIR/{q,k,v,dout}.bin (16-bit values, [B, H, S, D] contiguous); writes
// DIR/{out,dq,dk,dv}.bin (same type) and DIR/lse.bin (f32, [B, H, SQ]).
#include <loom/graph.hpp>
#include <loom/ops/attention.hpp>
#include <loom/runtime.hpp>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

template <class T>
std::vector<T> read_file(const std::string& path, std::size_t count) {
  std::ifstream in(path, std::ios::binary);
  std::vector<T> values(count);
  if (!in.read(reinterpret_cast<char*>(values.data()),
               static_cast<std::streamsize>(count * sizeof(T)))) {
    throw std::runtime_error(path + ": expected " + std::to_string(count * sizeof(T)) + " bytes");
  }
  return values;
}

template <class T>
void write_file(const std::string& path, const std::vector<T>& values) {
  std::ofstream out(path, std::ios::binary);
  if (!out.write(reinterpret_cast<const char*>(values.data()),
                 static_cast<std::streamsize>(values.size() * sizeof(T)))) {
    throw std::runtime_error(path + ": write failed");
  }
}

template <class T>
int run(const std::string& dir, loom::Runtime& rt, std::int64_t b, std::int64_t h, std::int64_t sq,
        std::int64_t sk, std::int64_t d, bool causal) {
  const auto count = [&](std::int64_t s) { return static_cast<std::size_t>(b * h * s * d); };
  const auto input = [&](const char* name, std::int64_t s) {
    const auto values = read_file<T>(dir + "/" + name + ".bin", count(s));
    return rt.upload(std::span<const T>(values), {b, h, s, d});
  };
  auto q = input("q", sq);
  auto k = input("k", sk);
  auto v = input("v", sk);
  auto dout = input("dout", sq);
  auto out = rt.tensor(loom::dtype_of<T>(), {b, h, sq, d});
  auto lse = rt.tensor<float>({b, h, sq});
  auto dq = rt.tensor(loom::dtype_of<T>(), {b, h, sq, d});
  auto dk = rt.tensor(loom::dtype_of<T>(), {b, h, sk, d});
  auto dv = rt.tensor(loom::dtype_of<T>(), {b, h, sk, d});
  const loom::ops::AttentionOptions options{.causal = causal};
  loom::Graph g;
  g.add(loom::ops::flash_attention(q, k, v, out, lse, options));
  g.add(loom::ops::flash_attention_backward(q, k, v, out, lse, dout, {.dq = dq, .dk = dk, .dv = dv},
                                            options));
  rt.submit(g).wait();
  write_file(dir + "/out.bin", rt.download<T>(out));
  write_file(dir + "/lse.bin", rt.download<float>(lse));
  write_file(dir + "/dq.bin", rt.download<T>(dq));
  write_file(dir + "/dk.bin", rt.download<T>(dk));
  write_file(dir + "/dv.bin", rt.download<T>(dv));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 9) {
    std::fprintf(stderr, "usage: %s DIR B H SQ SK D bf16|f16 causal(0|1) [cpu]\n", argv[0]);
    return 2;
  }
  try {
    const std::string dir = argv[1];
    const auto n = [&](int i) { return static_cast<std::int64_t>(std::stoll(argv[i])); };
    const std::string dtype = argv[7];
    const bool causal = n(8) != 0;
    const bool on_cpu = argc > 9 && std::string(argv[9]) == "cpu";
    loom::RuntimeOptions options;
    if (on_cpu) options.backend = loom::Backend::cpu;
    loom::Runtime rt(options);
    if (dtype == "bf16") return run<loom::bfloat16>(dir, rt, n(2), n(3), n(4), n(5), n(6), causal);
    if (dtype == "f16") return run<loom::half>(dir, rt, n(2), n(3), n(4), n(5), n(6), causal);
    std::fprintf(stderr, "attention_files: dtype must be bf16 or f16, got %s\n", dtype.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attention_files: %s\n", e.what());
    return 1;
  }
}
