// Private to the CPU backend: FLAXPP_CPU_CLONES compiles a loop for AVX-512, for AVX2 with FMA
// and for any x86-64 (GCC's target_clones, chosen when the program starts by what the
// processor has). A file using it is compiled without contraction of a multiply and an add
// (the same bits in every clone) and without floating-point traps (selects and divisions are
// computed for every lane, so the loops vectorise): src/CMakeLists.txt lists those files.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FLAXPP_CPU_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FLAXPP_CPU_CLONES
#endif
