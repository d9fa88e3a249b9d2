// Which builds of the row kernels this CPU runs (CMake compiles them apart with AVX2/FMA and
// AVX-512): one place for the run-time checks that select them.
#pragma once

namespace normlab::model::kernels {

// AVX2 and FMA on an x86-64 build: the row kernels' AVX2 builds run. False elsewhere.
bool avx2_fma();

// Whether ATen runs its own kernels at AVX-512 here (the CPU has it and ATEN_CPU_CAPABILITY does
// not lower it): the AVX-512 builds run, and float32 products are packed (model/linear.h).
bool aten_avx512();

// Whether oneDNN packs and multiplies bf16 weights here: it needs AVX-512 BW, VL and DQ (or
// AVX-NE-CONVERT, which GCC 12 cannot ask for; such CPUs then take ATen's path). On an AVX2-only
// CPU its reorder throws ("bf16 path needs the cpu support ..."), so bf16 products take at::linear.
bool onednn_bf16();

// AVX-512 VNNI: fbgemm's int8 products add u8 x s8 pairs exactly (vpdpbusd). Without it they
// are summed in saturating int16 (vpmaddubsw), which full-range uint8 activations can overflow,
// so int8 decoding then quantises activations to 7 bits (model/int8_linear.h).
bool avx512_vnni();

}  // namespace normlab::model::kernels
