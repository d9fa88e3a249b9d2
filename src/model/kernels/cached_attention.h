// One decoding step of self-attention over keys and values kept per position
// (model/decoder_cache.h): each query row reads its own history through a table of row
// indices, so a beam reordering moves no keys or values, and the scores, their softmax and the
// weighted sum of the values are one pass per row, instead of a gathered (N,H,P,D) copy of the
// cache at every step followed by a batched product, a softmax and another batched product
// (docs/performance.md, Decoding).
#pragma once

#include <vector>

#include <torch/types.h>

namespace normlab::model::kernels {

// Whether cached_attention() applies to the query q (N,H,D): float32, bf16 or fp16 on a CPU
// with AVX2 and FMA, D a multiple of 8. Elsewhere attention runs on SelfHistory::dense().
bool cached_attention_fused(const torch::Tensor& q);

// q (N,H,D), already scaled by 1/sqrt(D); keys[p], values[p] (N_p,H,D) in q's dtype, contiguous;
// rows int64 (N,P) on the CPU, P = keys.size(): row n's position p is row rows[n][p] of keys[p]
// and values[p]. Returns (N,H,D) in q's dtype: per row and head softmax_p(q . k_p) v_p, in float
// arithmetic.
torch::Tensor cached_attention(const torch::Tensor& q, const std::vector<torch::Tensor>& keys,
                               const std::vector<torch::Tensor>& values, const torch::Tensor& rows);

}  // namespace normlab::model::kernels
