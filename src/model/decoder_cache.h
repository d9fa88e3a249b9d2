// What incremental decoding keeps between steps (fairseq's incremental_state), laid out so
// that a step writes one position in place, a beam reordering is one gather, and attention
// reads dense keys and values: every decoder layer's self-attention keys and values in one
// buffer, and each layer's encoder-attention keys and values, projected once per sentence (not
// per beam).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace normlab::model {

// The keys and values one attention reads, each (B,H,L,D).
struct KeyValues {
  torch::Tensor k, v;
};

class DecoderCache {
 public:
  // `encoder`: each decoder layer's encoder-attention keys and values (B,H,S,D) for the B
  // sentences, made contiguous here; `encoder_bias` (B,H,1,S): added to the encoder-attention
  // scores, -inf at source padding, else 0. `max_positions`: the most positions the decoder
  // will be fed (beam search: max_len + 1).
  DecoderCache(std::vector<KeyValues> encoder, torch::Tensor encoder_bias, int64_t max_positions);

  int64_t steps() const { return steps_; }  // positions fed so far
  // Writes `layer`'s newest self-attention key and value (N,H,1,D) at position steps() in
  // place and returns positions 0..steps() as contiguous views (N,H,steps()+1,D). N = B * beam
  // rows.
  KeyValues append(size_t layer, const KeyValues& newest);
  void advance() { ++steps_; }  // the step is done: later append()s write the next position
  const KeyValues& encoder(size_t layer) const { return encoder_[layer]; }
  const torch::Tensor& encoder_bias() const { return encoder_bias_; }

  // Row i becomes row rows[i] (int64 (N'); beams taking over other beams' prefixes, finished
  // sentences dropped): one gather for every layer's keys and values. The encoder's keys and
  // values follow `sentences` (int64 (B')) when it is defined (sentences dropped), else stay.
  void reorder(const torch::Tensor& rows, const torch::Tensor& sentences);

 private:
  // Moves positions 0..steps()-1 of the rows `rows` (all rows in order when undefined) into
  // the spare storage laid out with a free position steps() after them, which becomes the
  // cache.
  void relayout(const torch::Tensor& rows);
  // `storage`'s first elements as (2 * layers, n, H, positions, D); grows `storage` (doubling,
  // so that a batch's buffers stay below glibc's mmap threshold and reuse freed heap memory,
  // core/runtime.h) when it holds fewer.
  torch::Tensor laid_out(torch::Tensor& storage, int64_t n, int64_t positions) const;

  std::vector<KeyValues> encoder_;
  torch::Tensor encoder_bias_;
  int64_t max_positions_;
  int64_t steps_ = 0;
  // The self-attention keys and values, dense: the first elements of self_ are
  // (2 * layers, N, H, P, D), layer l's keys at 2l and values at 2l+1, with P = steps() + 1
  // (room for the newest position) or P = steps() (no room yet: the next append relayouts).
  // Dense rows make attention's batched products several times faster than rows strided by a
  // capacity (docs/performance.md). A step's gather writes into spare_, then the two swap.
  torch::Tensor self_, spare_;  // flat storage
  torch::Tensor view_;          // self_ as laid out now; undefined before the first append
};

}  // namespace normlab::model
