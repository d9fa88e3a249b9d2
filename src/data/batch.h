// Padded tensors for one batch of sentence pairs or of blocks of running text
// (docs/conventions.md, "Tokens").
#pragma once

#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace normlab::data {

using Sentence = std::vector<int64_t>;  // token ids, no special tokens

// How a corpus's token lists become a batch's rows: sentence pairs (src and tgt of one example),
// blocks of a text stream (data/text_stream.h: tgt holds N+1 consecutive tokens t_0..t_N, the
// decoder reads t_0..t_{N-1} and predicts t_1..t_N; src is empty), or an encoder's blocks for
// masked-LM (src holds <s> and N-1 tokens; the batch's src and target are that block until
// data/masking.h masks it; tgt is empty), or a classifier's examples (src holds <s> A </s> or
// <s> A </s> B </s>, tgt the one class id; the batch's target is (B,1), its segments 0 up to the
// first </s> and 1 after it).
enum class Layout { kPairs, kBlocks, kMaskedBlocks, kClassify };

struct Batch {
  torch::Tensor src;                 // (B,S) x_1..x_n </s>, right-padded; (B,0) for blocks
  torch::Tensor prev_output_tokens;  // (B,T) </s> y_1..y_m; blocks: t_0..t_{N-1}
  torch::Tensor target;              // (B,T) y_1..y_m </s>; blocks: t_1..t_N; masked: (B,S), pad where unpredicted;
                                     // classify: (B,1) class ids
  int64_t target_tokens = 0;         // non-padding entries of target (classify: B)
  torch::Tensor segments;            // (B,S) segment (token type) ids of src; undefined: all 0
};

// Sentences [begin, end) of `src` and `tgt` as one batch on the CPU.
Batch make_batch(const std::vector<Sentence>& src, const std::vector<Sentence>& tgt, size_t begin,
                 size_t end);
// An encoder's inputs and their targets, already masked (token by token: the id to predict, or
// pad where nothing is predicted; `normlab score` of an encoder-only model), rows [begin, end).
Batch masked_batch(const std::vector<Sentence>& inputs, const std::vector<Sentence>& targets, size_t begin,
                   size_t end);
// The examples `indices` (e.g. one batch of make_batches) as one batch, in that order.
Batch gather_batch(const std::vector<Sentence>& src, const std::vector<Sentence>& tgt,
                   const std::vector<int64_t>& indices, Layout layout = Layout::kPairs);

}  // namespace normlab::data
