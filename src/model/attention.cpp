#include "model/attention.h"

#include <cmath>
#include <limits>

#include <torch/torch.h>

#include "model/dropout.h"

namespace normlab::model {

MultiheadAttentionImpl::MultiheadAttentionImpl(int64_t d_model, int64_t heads,
                                               double attention_dropout)
    : heads_(heads), attention_dropout_(attention_dropout) {
  q_proj = register_module("q_proj", torch::nn::Linear(d_model, d_model));
  k_proj = register_module("k_proj", torch::nn::Linear(d_model, d_model));
  v_proj = register_module("v_proj", torch::nn::Linear(d_model, d_model));
  out_proj = register_module("out_proj", torch::nn::Linear(d_model, d_model));
}

torch::Tensor MultiheadAttentionImpl::forward(const torch::Tensor& query,
                                              const torch::Tensor& key_value,
                                              const torch::Tensor& key_padding_mask,
                                              bool causal) {
  const int64_t B = query.size(0), T = query.size(1), C = query.size(2);
  const int64_t S = key_value.size(1), D = C / heads_;
  // (B,T,C) -> (B,H,T,D)
  auto split = [&](const torch::Tensor& x, int64_t len) {
    return x.view({B, len, heads_, D}).transpose(1, 2);
  };
  auto q = split(q_proj(query) * (1.0 / std::sqrt(static_cast<double>(D))), T);
  auto k = split(k_proj(key_value), S);
  auto v = split(v_proj(key_value), S);

  auto scores = torch::matmul(q, k.transpose(-2, -1));  // (B,H,T,S)
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (key_padding_mask.defined()) {
    scores = scores.masked_fill(key_padding_mask.view({B, 1, 1, S}), neg_inf);
  }
  if (causal) {
    auto future = torch::ones({T, S}, query.options().dtype(torch::kBool)).triu(1);
    scores = scores.masked_fill(future, neg_inf);
  }
  auto probs = torch::softmax(scores, -1);
  probs = model::dropout(probs, attention_dropout_, is_training());
  auto context = torch::matmul(probs, v).transpose(1, 2).reshape({B, T, C});  // (B,T,C)
  return out_proj(context);
}

}  // namespace normlab::model
