// What incremental decoding keeps between steps (fairseq's incremental_state), laid out so
// that a step writes one position in place and a beam reordering is one gather: every decoder
// layer's self-attention keys and values in one buffer, and each layer's encoder-attention
// keys and values, projected once per sentence (not per beam).
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
  // place and returns positions 0..steps() as views (N,H,steps()+1,D). N = B * beam rows.
  KeyValues append(size_t layer, const KeyValues& newest);
  void advance() { ++steps_; }  // the step is done: later append()s write the next position
  const KeyValues& encoder(size_t layer) const { return encoder_[layer]; }
  const torch::Tensor& encoder_bias() const { return encoder_bias_; }

  // Row i becomes row rows[i] (int64 (N'); beams taking over other beams' prefixes, finished
  // sentences dropped): one gather for every layer's keys and values. The encoder's keys and
  // values follow `sentences` (int64 (B')) when it is defined (sentences dropped), else stay.
  void reorder(const torch::Tensor& rows, const torch::Tensor& sentences);

 private:
  // The buffers for at least `positions` positions: grown by doubling, so that a batch's
  // buffers stay below glibc's mmap threshold and reuse freed heap memory (core/runtime.h).
  void reserve(int64_t positions);

  std::vector<KeyValues> encoder_;
  torch::Tensor encoder_bias_;
  int64_t max_positions_;
  int64_t steps_ = 0;
  int64_t rows_ = 0;     // N: the rows in use (the buffers may hold more)
  torch::Tensor self_;   // (2 * layers, N, H, capacity, D): layer l's keys at 2l, values at 2l+1
  torch::Tensor spare_;  // self_'s shape: the target of the next reorder, then swapped
};

}  // namespace normlab::model
