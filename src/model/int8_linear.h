// int8 linear layers for decoding (`--precision int8`, docs/precision.md), CTranslate2's int8
// scheme on the fbgemm kernels of the PyTorch wheel (bench/int8_gemm.py, docs/performance.md):
//   weights: symmetric int8, one scale per output row, max |w_n| / 127 (CTranslate2
//     src/ops/quantize_cpu.cc: "rescales based on the per batch absolute maximum", per row);
//   activations: per row too: each row of x is divided by its own max |x|, and a sentinel row
//     (1, -1, 0, ...) fixes the range that fbgemm's dynamic quantisation reads from the whole
//     input (`quantized::linear_dynamic`: one uint8 scale and zero point, PyTorch's dynamic
//     quantisation) to [-1, 1], so every row is quantised in steps of 2/255 of its own max |x|
//     (2/127 without AVX-512 VNNI, kernels::avx512_vnni), whatever rows share the batch;
//   int32 accumulation in fbgemm, then each output row times its max |x|, plus the bias.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/types.h>

namespace normlab::model {

// Whether this LibTorch has fbgemm (its engine and the quantized::linear_* operators).
bool int8_available();

// w (N,K) float32 on the CPU -> its per-row int8 weights packed for fbgemm (without a bias).
c10::IValue int8_pack(const torch::Tensor& w);

// x (..., K) float32, `packed` from int8_pack(w), b (N) or undefined -> (..., N) float32,
// about x wᵀ + b (relu(x wᵀ + b) with `relu`).
torch::Tensor int8_linear(const torch::Tensor& x, const c10::IValue& packed, const torch::Tensor& b, bool relu);

}  // namespace normlab::model
