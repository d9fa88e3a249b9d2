#include "model/attention.h"

#include <cmath>
#include <limits>

#include <torch/torch.h>

#include "model/dropout.h"
#include "model/linear.h"

namespace normlab::model {

void KeyValueCache::reorder(const torch::Tensor& index) {
  if (!k.defined()) return;
  k = k.index_select(0, index);
  v = v.index_select(0, index);
}

MultiheadAttentionImpl::MultiheadAttentionImpl(int64_t d_model, int64_t heads,
                                               double attention_dropout)
    : heads_(heads), attention_dropout_(attention_dropout) {
  q_proj = register_module("q_proj", torch::nn::Linear(d_model, d_model));
  k_proj = register_module("k_proj", torch::nn::Linear(d_model, d_model));
  v_proj = register_module("v_proj", torch::nn::Linear(d_model, d_model));
  out_proj = register_module("out_proj", torch::nn::Linear(d_model, d_model));
}

torch::Tensor MultiheadAttentionImpl::split_heads(const torch::Tensor& x) const {
  return x.view({x.size(0), x.size(1), heads_, x.size(2) / heads_}).transpose(1, 2);
}

std::vector<torch::Tensor> MultiheadAttentionImpl::project(
    const torch::Tensor& x, std::initializer_list<const torch::nn::Linear*> layers) const {
  std::vector<torch::Tensor> weights, biases;
  for (const auto* l : layers) {
    weights.push_back((*l)->weight);
    biases.push_back((*l)->bias);
  }
  auto y = torch::linear(x, torch::cat(weights), torch::cat(biases));  // (B,L,n*C)
  std::vector<torch::Tensor> out;
  for (const auto& part : y.split(x.size(2), -1)) out.push_back(split_heads(part));
  return out;
}

torch::Tensor MultiheadAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k,
                                             const torch::Tensor& v,
                                             const torch::Tensor& key_padding_mask, bool causal) {
  const int64_t B = q.size(0), T = q.size(2), S = k.size(2), C = q.size(1) * q.size(3);
  auto scores = torch::matmul(q, k.transpose(-2, -1));  // (B,H,T,S)
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (key_padding_mask.defined()) {
    scores = scores.masked_fill(key_padding_mask.view({B, 1, 1, S}), neg_inf);
  }
  if (causal) {
    auto future = torch::ones({T, S}, q.options().dtype(torch::kBool)).triu(1);
    scores = scores.masked_fill(future, neg_inf);
  }
  auto probs = torch::softmax(scores, -1);
  probs = model::dropout(probs, attention_dropout_, is_training());
  auto context = torch::matmul(probs, v).transpose(1, 2).reshape({B, T, C});  // (B,T,C)
  return linear(out_proj, context);
}

torch::Tensor MultiheadAttentionImpl::forward(const torch::Tensor& query,
                                              const torch::Tensor& key_value,
                                              const torch::Tensor& key_padding_mask,
                                              bool causal) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(query.size(2) / heads_));
  if (query.is_same(key_value)) {  // self-attention: q, k and v in one product
    auto qkv = project(query, {&q_proj, &k_proj, &v_proj});
    return attend(qkv[0] * scale, qkv[1], qkv[2], key_padding_mask, causal);
  }
  auto q = split_heads(linear(q_proj, query) * scale);
  auto kv = project(key_value, {&k_proj, &v_proj});
  return attend(q, kv[0], kv[1], key_padding_mask, causal);
}

torch::Tensor MultiheadAttentionImpl::forward_step(const torch::Tensor& query,
                                                   const torch::Tensor& key_value,
                                                   const torch::Tensor& key_padding_mask,
                                                   bool static_kv, KeyValueCache& cache) {
  if (!static_kv || !cache.k.defined()) {
    // Two products, not project(): a step's input is one position, and stacking the weights
    // every step would copy them, and under bf16 cast the copy again (autocast caches the
    // casts of the weights themselves for the whole search).
    auto k = split_heads(linear(k_proj, key_value)), v = split_heads(linear(v_proj, key_value));  // (B,H,L,D)
    const bool append = !static_kv && cache.k.defined();
    cache.k = append ? torch::cat({cache.k, k}, 2) : k;
    cache.v = append ? torch::cat({cache.v, v}, 2) : v;
  }
  // The query is the newest position: every cached key is at or before it, so no causal mask.
  const double scale = 1.0 / std::sqrt(static_cast<double>(query.size(2) / heads_));
  auto q = split_heads(linear(q_proj, query) * scale);
  return attend(q, cache.k, cache.v, key_padding_mask, false);
}

}  // namespace normlab::model
