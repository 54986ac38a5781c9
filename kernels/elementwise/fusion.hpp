#pragma once
// Vertical fusion: a chain (in general a DAG) of elementwise maps run as one
// kernel, each element read once from every input and written once.
//
// Why runtime compilation (NVRTC) and not expression templates. A fused
// chain reaches loom from a graph: a user composes it at run time
// (loom::ops::fused_map), possibly from data (a model description), so the
// set of chains is not known when libloom.so is built, and expression
// templates can only fuse what some translation unit instantiated at compile
// time. NVRTC compiles exactly the chain asked for, for the device's exact
// architecture. Its costs, and how they are kept small:
//   - 10-100 ms a compile: paid once per distinct chain structure and
//     architecture, then cached for the process (the cache key is the
//     generated source, which depends on the ops and dtypes only: scalars and
//     constants are kernel arguments, so changing alpha recompiles nothing);
//     the op compiles at submit (validate) where it can, not on the
//     scheduling thread.
//   - No driver API: the cubin is loaded with the runtime's
//     cudaLibraryLoadData / cudaLibraryGetKernel and launched with
//     cudaLaunchKernel, so libloom.so links no libcuda and still loads on a
//     machine without a driver.
//   - No link dependency on NVRTC either: libnvrtc is opened with dlopen the
//     first time a fused kernel is compiled, so programs that never fuse do
//     not need it installed.
//   - Compilation runs without a GPU, so the generated code is unit-tested on
//     CPU machines (CI) too.
// Expression templates would have cost nothing at run time, but only for
// chains fixed in C++ source; the launch-free replay of a compiled graph
// leaves NVRTC's one-time cost as the only difference, and it is paid once.
//
// Semantics, on both backends: values are f32 inside the chain; inputs are
// widened on load, `round` rounds to f16 or bf16 (nearest even) where the
// chain asks, and the result is rounded once to the output dtype. The CPU
// backend interprets the same program (fused_map_reference, in
// reference.cpp).
//
// Every map of maps.hpp is an instruction here, computed by the same
// functions (map_math.inc, compiled into the generated source).
//
// Two forms of kernel, chosen by the program's layout:
//   vectorized  contiguous operands of one length; inputs marked scalar are
//               one element broadcast, read once a thread. Each thread moves
//               16-byte vectors of every output.
//   strided     any strides (slices, transposes, broadcasts with stride 0),
//               one element a thread and step, offsets from a FusedGeometry
//               walked innermost first (no division at rank 1).
// A program has one or several outputs (kFusedMaxOutputs), each the value
// of one register, in one pass.
//
// Limits: kFusedMaxInputs inputs, kFusedMaxOutputs outputs,
// kFusedMaxConstants scalars (each constant and each axpby's alpha and
// beta), kFusedMaxMaps maps (instructions other than reading an input or a
// scalar); operands of f32, f16 or bf16.

#include <loom/cuda_interop.hpp>
#include <loom/dtype.hpp>

#include "elementwise/maps.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace loom::kernels {

inline constexpr int kFusedMaxInputs = 8;
inline constexpr int kFusedMaxOutputs = 4;
inline constexpr int kFusedMaxRank = 8;
inline constexpr int kFusedMaxConstants = 32;
inline constexpr int kFusedMaxMaps = 256;
/// 16-byte vectors of the output each thread of the fused kernel moves;
/// twice as many where an input is 16-bit and the output f32 (8-byte input
/// vectors), so that each thread keeps 32 bytes of every input in flight.
inline constexpr int kFusedVectorsPerThread = 2;
inline constexpr const char* kFusedKernelName = "loom_fused_map";

#define LOOM_FUSED_OPCODE(name) name,
enum class FusedOpcode : std::uint8_t {
  input,
  constant,
  add,
  mul,
  axpby,
  relu,
  gelu_tanh,
  round,
  LOOM_UNARY_MATH_MAPS(LOOM_FUSED_OPCODE) LOOM_BINARY_MATH_MAPS(LOOM_FUSED_OPCODE) where
};
#undef LOOM_FUSED_OPCODE

/// The opcode's name ("cast" for round), as MapExpr::to_string writes it.
const char* opcode_name(FusedOpcode op) noexcept;
/// Operand registers the opcode reads: 0 to 3.
int opcode_arity(FusedOpcode op) noexcept;
/// The opcode of a map (every MapKind but cast, which is round).
FusedOpcode opcode_of(MapKind kind);

/// One instruction; its value is register k, k its position in the program.
struct FusedInstr {
  FusedOpcode op = FusedOpcode::input;
  int a = -1;  ///< first operand register
  int b = -1;  ///< second operand register (binary maps, where's a)
  int index =
      0;  ///< input: the input; constant: its slot; axpby: alpha's slot (beta's is index + 1)
  DType dtype = DType::f32;  ///< round: the dtype rounded to
  int c = -1;                ///< third operand register (where's b)
};

/// One result: the value of register `reg`, stored as `dtype`.
struct FusedOutput {
  int reg = 0;
  DType dtype = DType::f32;
};

/// A fused chain in SSA form.
struct FusedProgram {
  std::vector<DType> inputs;
  /// With `outputs` empty: one result, the last instruction's value, of this dtype.
  DType output = DType::f32;
  std::vector<FusedInstr> code;
  std::vector<float> constants;
  /// Several results (up to kFusedMaxOutputs); when set, `output` is unused.
  std::vector<FusedOutput> outputs;
  /// Vectorized form: the inputs that are one element read for every
  /// element (empty: none). Ignored by the strided form.
  std::vector<bool> scalar_inputs;
  /// The strided form: every operand addressed through a FusedGeometry.
  bool strided = false;

  /// The results: `outputs`, or the single one `output` describes.
  std::vector<FusedOutput> results() const;
  bool is_scalar_input(std::size_t i) const noexcept {
    return i < scalar_inputs.size() && scalar_inputs[i];
  }
};

/// The shape all outputs share and each operand's strides in elements:
/// inputs first (in order), then outputs. A contiguous launch of n elements
/// is rank 1, shape n, strides 1 (0 for a scalar input).
struct FusedGeometry {
  int rank = 0;
  std::int64_t shape[kFusedMaxRank] = {};
  std::int64_t strides[kFusedMaxInputs + kFusedMaxOutputs][kFusedMaxRank] = {};
  std::int64_t numel() const noexcept;
  /// rank 1 over n elements, stride 1 for every operand but the scalar
  /// inputs of `program` (0).
  static FusedGeometry contiguous(const FusedProgram& program, std::size_t n);
};

/// Merges dimensions contiguous in every one of `operands` operands and
/// drops extents of 1 (the same elements, fewer indices to compute).
FusedGeometry coalesce(const FusedGeometry& geometry, int operands) noexcept;

/// @throws InvalidArgument naming the first problem (bad register, slot,
/// input, dtype, or a limit exceeded).
void check_program(const FusedProgram& program);
/// Both backends check a launch's operands with it (fusion.cpp, reference.cpp).
/// @throws InvalidArgument unless `inputs` and `outputs` are the numbers of
/// operands the program reads and writes.
void check_operand_counts(const FusedProgram& program, std::size_t inputs, std::size_t outputs);

/// The CUDA C++ source of the fused kernel (extern "C" kFusedKernelName).
/// It depends on the program's structure and dtypes, not on its constants.
std::string fused_source(const FusedProgram& program);

/// Whether NVRTC can be loaded; otherwise why not, in `why`.
bool nvrtc_available(std::string* why = nullptr);

/// Compiles `source` with NVRTC to a cubin for sm_<major><minor>.
/// @throws Error when NVRTC is missing or the compile fails (with its log).
std::vector<char> nvrtc_compile(const std::string& source, int major, int minor);

/// A program with its generated source: made once, launched often (the
/// source is the cache key; generating it costs microseconds a launch).
class FusedKernel {
 public:
  /// @throws InvalidArgument as check_program.
  explicit FusedKernel(FusedProgram program);
  const FusedProgram& program() const noexcept { return program_; }
  const std::string& source() const noexcept { return source_; }
  /// Compiles (once, cached for the process) for the current device. Blocks
  /// for the compile on a cache miss. @throws as nvrtc_compile; CudaError.
  void prepare() const;
  /// Enqueues out[i] = program(inputs...[i]) for i < n on `stream`: one
  /// kernel. Device pointers, contiguous. out may be one of the inputs
  /// (identical view). @throws InvalidArgument for the wrong number of
  /// inputs or outputs; as prepare().
  void launch(const std::vector<const void*>& inputs, void* out, std::size_t n,
              StreamView stream) const;
  /// The general form: several outputs, and the geometry the strided form
  /// walks (the vectorized form reads its element count only).
  void launch(const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
              const FusedGeometry& geometry, StreamView stream) const;

 private:
  FusedProgram program_;
  std::string source_;
};

/// FusedKernel(program).prepare().
void prepare_fused_map(const FusedProgram& program);
/// FusedKernel(program).launch(...): generates the source on every call.
void fused_map(const FusedProgram& program, const std::vector<const void*>& inputs, void* out,
               std::size_t n, StreamView stream);

/// The CPU reference: the same program, interpreted. Host pointers.
void fused_map_reference(const FusedProgram& program, const std::vector<const void*>& inputs,
                         void* out, std::size_t n);
/// The same over several outputs and any geometry (either form).
void fused_map_reference(const FusedProgram& program, const std::vector<const void*>& inputs,
                         const std::vector<void*>& outputs, const FusedGeometry& geometry);

}  // namespace loom::kernels
