// What incremental decoding keeps between steps (fairseq's incremental_state), laid out so
// that nothing is copied per step: every decoder layer's self-attention keys and values as
// each step produced them (one tensor per position), with a table of which row of each position
// every current row descends from, so that a beam reordering only reorders that table (int64s,
// not keys and values); and each layer's encoder-attention keys and values, projected once per
// sentence (not per beam).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace normlab::model {

// The keys and values one attention reads, each (B,H,L,D).
struct KeyValues {
  torch::Tensor k, v;
};

// One layer's self-attention keys and values for positions 0..P-1 as the current N rows read
// them: row n's position p is row rows[n][p] of k[p] and v[p] (each (N_p,H,D), contiguous, N_p
// the rows decoding at step p). model/kernels/attention_step.h reads them in place.
struct SelfHistory {
  std::vector<torch::Tensor> k, v;
  torch::Tensor rows;  // int64 (N,P), on the keys' device
  // The same keys and values gathered into (N,H,P,D) each (attention where the kernel does not
  // apply: CUDA, float64).
  KeyValues dense() const;
};

// One layer's encoder-attention keys and values (B,H,S,D) and the score bias (B,H,1,S), -inf at
// source padding, else 0. `sentences` int64 (B'), or undefined (B' = B, in order): which of the
// B sentences the current B' are. With `sentences` defined only the fused kernel reads them
// (model/kernels/attention_step.h); elsewhere the cache gathers instead.
struct EncoderMemory {
  KeyValues kv;
  torch::Tensor bias, sentences;
};

class DecoderCache {
 public:
  // `encoder`: each decoder layer's encoder-attention keys and values (B,H,S,D) for the B
  // sentences; `encoder_bias` (B,H,1,S): added to the encoder-attention scores, -inf at source
  // padding, else 0. `max_positions`: the most positions the decoder will be fed (beam search:
  // max_len + 1). The keys, values and bias are made contiguous here. Where the fused attention
  // steps apply, finished sentences leave through EncoderMemory's `sentences`; elsewhere the
  // keys, values and bias are gathered when sentences leave.
  DecoderCache(std::vector<KeyValues> encoder, torch::Tensor encoder_bias, int64_t max_positions);
  // A decoder without encoder attention (the decoder-only kind): self-attention only, `layers`
  // layers; encoder() must not be called.
  DecoderCache(size_t layers, int64_t max_positions);

  int64_t steps() const { return steps_; }  // positions fed so far
  // Keeps `layer`'s newest self-attention key and value (N,H,1,D), position steps(), without a
  // copy (they are the (N,1,C) projection's output viewed by heads), and returns the layer's
  // positions 0..steps(). N = B * beam rows.
  const SelfHistory& append(size_t layer, const KeyValues& newest);
  void advance();  // the step is done (every layer appended): later append()s write the next position
  // Positions 0..L-1 of every layer at once, into a cache fed nothing yet (a prompt in one
  // forward pass: generate's prefill): `layers[l]` is layer l's keys and values (N,H,L,D). Each
  // position is kept as append() keeps it, so the steps after it read the cache as if the L
  // positions had come one step at a time.
  void fill(const std::vector<KeyValues>& layers);
  const EncoderMemory& encoder(size_t layer) const { return encoder_[layer]; }

  // Row i becomes row rows[i] (int64 (N'); beams taking over other beams' prefixes, finished
  // sentences dropped, or prompts' rows repeated for their beams or samples): a gather of the
  // row table only; the keys and values stay where they are (a finished sentence's rows too,
  // until the batch ends). The encoder memory follows `sentences` (int64 (B')) when it is
  // defined (sentences dropped), else stays.
  void reorder(const torch::Tensor& rows, const torch::Tensor& sentences);

 private:
  std::vector<EncoderMemory> encoder_;
  bool fused_ = false;  // the fused attention steps read the encoder memory (else it is gathered)
  int64_t max_positions_;
  int64_t steps_ = 0;
  std::vector<SelfHistory> self_;  // per layer
  // int64 (N, steps()): the current rows' ancestors at positions 0..steps()-1; undefined before
  // the first step. step_rows_: the same with the position underway, once a layer appended it.
  torch::Tensor rows_, step_rows_;
};

}  // namespace normlab::model
