// One decoding step of attention, fused for the CPU: per query row the scores, their softmax and
// the weighted sum of the values in one pass (instead of a batched product, a softmax and another
// batched product, each with its reshaping copies), over keys and values read where they are:
// - self-attention's kept per position (model/decoder_cache.h), each row reading its own history
//   through a table of row indices, so that a beam reordering moves no keys or values;
// - encoder-attention's (B,H,S,D), read by a sentence's beams together.
// docs/performance.md, Decoding.
#pragma once

#include <vector>

#include <torch/types.h>

namespace normlab::model::kernels {

// Whether the fused steps apply to the query q (N,H,D): float32, bf16 or fp16 on a CPU with AVX2
// and FMA, D a multiple of 8. Elsewhere attention runs on ATen's batched products.
bool attention_step_fused(const torch::Tensor& q);
// The same for a query of this dtype, device and head dimension D.
bool attention_step_fused(c10::ScalarType type, c10::Device device, int64_t head_dim);

// q (N,H,D), already scaled by 1/sqrt(D); keys[p], values[p] (N_p,H,D) in q's dtype, contiguous;
// rows int64 (N,P) on the CPU, P = keys.size(): row n's position p is row rows[n][p] of keys[p]
// and values[p]. Returns (N,H,D) in q's dtype: per row and head softmax_p(q . k_p) v_p, in float
// arithmetic.
torch::Tensor self_attention_step(const torch::Tensor& q, const std::vector<torch::Tensor>& keys,
                                  const std::vector<torch::Tensor>& values, const torch::Tensor& rows);

// q (N,H,D) already scaled; k, v (B,H,S,D) in q's dtype with the same strides, each head's D
// elements contiguous (the (B,S,C) projection viewed by heads is read as it is); `sentences`
// int64 (B') on the CPU, or undefined (B' = B, in order): the N / B' consecutive rows of the
// i-th current sentence (its beams) read sentence sentences[i]'s keys and values. bias (B,H,1,S)
// in q's dtype, contiguous, is added to the scores (-inf at padding; every sentence needs a
// finite one), or undefined. Returns (N,H,D).
torch::Tensor encoder_attention_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const torch::Tensor& bias, const torch::Tensor& sentences);

}  // namespace normlab::model::kernels
