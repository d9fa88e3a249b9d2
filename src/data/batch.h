// Padded tensors for one batch of sentence pairs (docs/conventions.md, "Tokens").
#pragma once

#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace normlab::data {

using Sentence = std::vector<int64_t>;  // token ids, no special tokens

struct Batch {
  torch::Tensor src;                 // (B,S) x_1..x_n </s>, right-padded
  torch::Tensor prev_output_tokens;  // (B,T) </s> y_1..y_m
  torch::Tensor target;              // (B,T) y_1..y_m </s>
  int64_t target_tokens = 0;         // non-padding entries of target
};

// Sentences [begin, end) of `src` and `tgt` as one batch on the CPU.
Batch make_batch(const std::vector<Sentence>& src, const std::vector<Sentence>& tgt, size_t begin,
                 size_t end);
// The pairs `indices` (e.g. one batch of make_batches) as one batch, in that order.
Batch gather_batch(const std::vector<Sentence>& src, const std::vector<Sentence>& tgt,
                   const std::vector<int64_t>& indices);

}  // namespace normlab::data
