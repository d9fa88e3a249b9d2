// Padded tensors for one batch of sentence pairs or of blocks of running text
// (docs/conventions.md, "Tokens").
#pragma once

#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace normlab::data {

using Sentence = std::vector<int64_t>;  // token ids, no special tokens

// How a corpus's token lists become a batch's rows: sentence pairs (src and tgt of one example),
// or blocks of a text stream (data/text_stream.h: tgt holds N+1 consecutive tokens t_0..t_N, the
// decoder reads t_0..t_{N-1} and predicts t_1..t_N; src is empty).
enum class Layout { kPairs, kBlocks };

struct Batch {
  torch::Tensor src;                 // (B,S) x_1..x_n </s>, right-padded; (B,0) for blocks
  torch::Tensor prev_output_tokens;  // (B,T) </s> y_1..y_m; blocks: t_0..t_{N-1}
  torch::Tensor target;              // (B,T) y_1..y_m </s>; blocks: t_1..t_N
  int64_t target_tokens = 0;         // non-padding entries of target
};

// Sentences [begin, end) of `src` and `tgt` as one batch on the CPU.
Batch make_batch(const std::vector<Sentence>& src, const std::vector<Sentence>& tgt, size_t begin,
                 size_t end);
// The examples `indices` (e.g. one batch of make_batches) as one batch, in that order.
Batch gather_batch(const std::vector<Sentence>& src, const std::vector<Sentence>& tgt,
                   const std::vector<int64_t>& indices, Layout layout = Layout::kPairs);

}  // namespace normlab::data
