// int8 linear layers for decoding (`--precision int8`, docs/precision.md), CTranslate2's int8
// scheme on fbgemm's int8 product from the PyTorch wheel (bench/int8_gemm.py, docs/performance.md):
//   weights: symmetric int8, one scale per output row, max |w_n| / 127 (CTranslate2
//     src/ops/quantize_cpu.cc: "rescales based on the per batch absolute maximum", per row),
//     packed once for fbgemm;
//   activations: per row too: each row of x is divided by its own max |x| and quantised on the
//     uint8 grid that PyTorch's dynamic quantisation gives [-1, 1] (steps of 2/255 around 128; 7-bit,
//     2/127 around 64, without AVX-512 VNNI, kernels::avx512_vnni), whatever rows share the batch;
//   int32 products in fbgemm (fbgemmPacked, the result copied nowhere), then in one pass over them:
//     minus the zero point times the weight's column sum, times the row's and the column's scales,
//     plus the bias (and the ReLU).
// Numerically this is what PyTorch's quantized::linear_dynamic computes on rows scaled to max |x| 1
// with a row fixing the range to [-1, 1] (the composition tests/decode/check_int8.py rebuilds),
// without the 5 passes around it (kernels/int8_rows.h).
#pragma once

#include <memory>

#include <torch/types.h>

namespace normlab::model {

// Whether this LibTorch has fbgemm and this CPU runs it (AVX2 at least).
bool int8_available();

// A weight in int8, packed for fbgemm, with its scales and column sums.
struct Int8Weight;

// w (N,K) float32 on the CPU -> its per-row int8 form (without a bias).
std::shared_ptr<const Int8Weight> int8_pack(const torch::Tensor& w);

// x (..., K) float32, `w` from int8_pack, b (N) or undefined -> (..., N) float32, about x wᵀ + b
// (relu(x wᵀ + b) with `relu`).
torch::Tensor int8_linear(const torch::Tensor& x, const Int8Weight& w, const torch::Tensor& b, bool relu);

}  // namespace normlab::model
