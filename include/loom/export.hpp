#pragma once
/// @file export.hpp
/// LOOM_API marks the declarations libloom.so exports. loom's sources are
/// compiled with hidden visibility (-fvisibility=hidden and
/// -fvisibility-inlines-hidden, for host and CUDA sources alike), so the
/// shared library's ABI is exactly what carries LOOM_API: the public API of
/// include/loom/. Exception types and the polymorphic interfaces (Op,
/// Collective) are exported as whole classes, so that their type information
/// is one across the boundary: a loom::NoDevice thrown inside libloom.so is
/// caught by `catch (const loom::NoDevice&)` in a program, and a program's
/// Op subclass is the library's Op.
///
/// Written by hand rather than by CMake's GenerateExportHeader: on ELF one
/// attribute both exports (building libloom.so) and imports (using it), so
/// the header needs no build-time switch, and it stays in include/loom/ with
/// the others (self-contained, installed as is, nothing generated on the
/// include path).

// loom's headers use C++20 (std::span, for one). loom::loom requires
// cxx_std_20 of its users and loom::cuda_interop gives nvcc -std=c++20; this
// says so plainly where a translation unit is compiled another way.
#if defined(__cplusplus) && __cplusplus < 202002L
#error "loom's headers need C++20 (-std=c++20; for nvcc: CUDA_STANDARD 20 or unset)"
#endif

#if defined(__GNUC__) || defined(__clang__)
#define LOOM_API __attribute__((visibility("default")))
#else
#define LOOM_API
#endif
