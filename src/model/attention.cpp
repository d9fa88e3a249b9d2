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
  // q, k, v in this order (not as call arguments, whose order C++ leaves open): the autograd
  // graph's order decides the order of gradient sums, hence their rounding.
  auto q = split_heads(linear(q_proj, query) * scale);
  auto k = split_heads(linear(k_proj, key_value));
  auto v = split_heads(linear(v_proj, key_value));
  return attend(q, k, v, key_padding_mask, causal);
}

torch::Tensor MultiheadAttentionImpl::forward_step(const torch::Tensor& query,
                                                   const torch::Tensor& key_value,
                                                   const torch::Tensor& key_padding_mask,
                                                   bool static_kv, KeyValueCache& cache) {
  if (!static_kv || !cache.k.defined()) {
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
