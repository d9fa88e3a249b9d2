// Multi-head scaled dot-product attention with fairseq's parameter names. Knows nothing of
// residual schemes: the ResidualBlock around it does. Its one switch is QK-norm (Dehghani et
// al. 2023, Wortsman et al. 2023): a norm over each head's D dimensions on q and on k before
// q.k, its parameters (D) shared by the heads, named q_norm and k_norm.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <functional>
#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

#include "model/config.h"
#include "model/decoder_cache.h"
#include "model/norm.h"

namespace normlab::model {

class MultiheadAttentionImpl : public torch::nn::Module {
 public:
  // `scale`: the factor on q.k (model/width.h's attention_scale: 1/sqrt(D), muP's sqrt(D0)/D);
  // `qk_norm`: the kind of QK-norm, or none; `unit_softmax_mult`: u-muP's forward scales with that
  // alpha_attn-softmax (model/unit_scaling.h: 1/sqrt(C) on every projection, the attention output's
  // scale for its key count; forward() only: decoding steps refuse it), or none.
  MultiheadAttentionImpl(int64_t d_model, int64_t heads, double scale, double attention_dropout,
                         std::optional<NormKind> qk_norm = std::nullopt,
                         std::optional<double> unit_softmax_mult = std::nullopt);

  // query (B,T,C) attends to key_value (B,S,C). key_padding_mask (B,S) bool, true at padding,
  // or undefined; causal masks keys after the query's own position (needs T == S).
  // Returns (B,T,C).
  torch::Tensor forward(const torch::Tensor& query, const torch::Tensor& key_value,
                        const torch::Tensor& key_padding_mask, bool causal);
  // x (B,L,C) -> its keys and values, each (B,H,L,D): what incremental decoding caches.
  KeyValues project_kv(const torch::Tensor& x) const;
  // Causal self-attention over a prompt x (B,L,C) at positions 0..L-1, as forward(x, x, {}, true):
  // the output (B,L,C) and the keys and values (B,H,L,D) its positions leave in a decoding cache
  // (DecoderCache::fill), the same as L forward_step()s would (within float rounding).
  std::pair<torch::Tensor, KeyValues> forward_prefill(const torch::Tensor& x);
  // One decoding step of encoder attention: query (N,1,C), the newest position, attends to the
  // memory's keys and values with N = B' * G: the G consecutive query rows of a sentence (its
  // beams) read it together (on the CPU fused, model/kernels/attention_step.h; elsewhere one
  // small matrix product, not G repeated rows), the bias added to the scores. Returns (N,1,C).
  torch::Tensor forward_step(const torch::Tensor& query, const EncoderMemory& memory);
  // One decoding step of self-attention: query (N,1,C) attends to the N rows' cached positions
  // (model/kernels/attention_step.h on the CPU, else ATen's products on history.dense()).
  torch::Tensor forward_step(const torch::Tensor& query, const SelfHistory& history);

  // Analysis hook (src/analysis, --trace-logits): sees forward()'s scaled scores q.k * scale
  // (B,H,T,S), -inf where masked, before the softmax (not forward_step()'s). Unset: no cost.
  void set_score_observer(std::function<void(const torch::Tensor&)> observer) {
    score_observer_ = std::move(observer);
  }

  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, out_proj{nullptr};
  Norm q_norm{nullptr}, k_norm{nullptr};  // QK-norm only

 private:
  // q (..., D) as projected -> QK-normed (when on), times the scale.
  torch::Tensor scaled_query(const torch::Tensor& q) const;
  // k (..., D) as projected -> QK-normed (when on).
  torch::Tensor key(const torch::Tensor& k) const;
  // (B,T,C) -> (B,H,T,D)
  torch::Tensor split_heads(const torch::Tensor& x) const;
  // x (B,L,C) through the given projections as one matrix product (their weights stacked): one
  // read of x, one cast of it under mixed precision (the weights stacked after their cached
  // casts), and the input's gradient summed inside the product. Returns each projection's
  // (B,H,L,D).
  std::vector<torch::Tensor> project(const torch::Tensor& x,
                                     std::initializer_list<const torch::nn::Linear*> layers) const;
  // linear(layer, x), times u-muP's 1/sqrt(C) when unit-scaled.
  torch::Tensor projected(const torch::nn::Linear& layer, const torch::Tensor& x) const;
  // A decoding step's query (N,1,C) -> (N,H,D), projected and scaled.
  torch::Tensor step_query(const torch::Tensor& query) const;
  // A decoding step on ATen's products from the scaled query q (N,H,D): kv (B,H,L,D) read by
  // the N / B consecutive rows of each of its B rows, `bias` (B,H,1,L) added to the scores, or
  // undefined. Returns (N,1,C).
  torch::Tensor attend_step(const torch::Tensor& q, const KeyValues& kv, const torch::Tensor& bias);
  // q (B,H,T,D) already scaled, k, v (B,H,S,D) -> (B,T,C)
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& key_padding_mask, bool causal);

  int64_t heads_;
  double scale_;
  double attention_dropout_;
  std::optional<double> unit_softmax_mult_;
  double projection_scale_;  // u-muP's 1/sqrt(C), else 1
  std::function<void(const torch::Tensor&)> score_observer_;
};
TORCH_MODULE(MultiheadAttention);

}  // namespace normlab::model
