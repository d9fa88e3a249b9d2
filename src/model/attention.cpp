#include "model/attention.h"

#include <cmath>
#include <limits>

#include <torch/torch.h>

#include "model/dropout.h"
#include "model/kernels/attention_step.h"
#include "model/linear.h"
#include "model/precision.h"
#include "model/unit_scaling.h"

namespace normlab::model {

MultiheadAttentionImpl::MultiheadAttentionImpl(int64_t d_model, int64_t heads, double scale,
                                               double attention_dropout,
                                               std::optional<NormKind> qk_norm,
                                               std::optional<double> unit_softmax_mult)
    : heads_(heads),
      scale_(scale),
      attention_dropout_(attention_dropout),
      unit_softmax_mult_(unit_softmax_mult),
      projection_scale_(unit_softmax_mult ? unit_linear_scale(d_model) : 1.0) {
  q_proj = register_module("q_proj", torch::nn::Linear(d_model, d_model));
  k_proj = register_module("k_proj", torch::nn::Linear(d_model, d_model));
  v_proj = register_module("v_proj", torch::nn::Linear(d_model, d_model));
  out_proj = register_module("out_proj", torch::nn::Linear(d_model, d_model));
  if (qk_norm) {
    q_norm = register_module("q_norm", Norm(*qk_norm, d_model / heads));
    k_norm = register_module("k_norm", Norm(*qk_norm, d_model / heads));
  }
}

torch::Tensor MultiheadAttentionImpl::scaled_query(const torch::Tensor& q) const {
  return (q_norm ? q_norm->forward(q) : q) * scale_;
}

torch::Tensor MultiheadAttentionImpl::key(const torch::Tensor& k) const {
  return k_norm ? k_norm->forward(k) : k;
}

torch::Tensor MultiheadAttentionImpl::projected(const torch::nn::Linear& layer, const torch::Tensor& x) const {
  auto y = linear(layer, x);
  return projection_scale_ == 1.0 ? y : y * projection_scale_;
}

torch::Tensor MultiheadAttentionImpl::split_heads(const torch::Tensor& x) const {
  return x.view({x.size(0), x.size(1), heads_, x.size(2) / heads_}).transpose(1, 2);
}

std::vector<torch::Tensor> MultiheadAttentionImpl::project(
    const torch::Tensor& x, std::initializer_list<const torch::nn::Linear*> layers) const {
  if (PackedWeights::int8_now()) {  // each weight quantised once: a stacked copy would be float
    std::vector<torch::Tensor> out;
    for (const auto* l : layers) out.push_back(split_heads(projected(*l, x)));
    return out;
  }
  std::vector<torch::Tensor> weights, biases;
  for (const auto* l : layers) {
    weights.push_back(autocast_operand((*l)->weight));
    biases.push_back(autocast_operand((*l)->bias));
  }
  auto y = torch::linear(x, torch::cat(weights), torch::cat(biases));  // (B,L,n*C)
  if (projection_scale_ != 1.0) y = y * projection_scale_;
  std::vector<torch::Tensor> out;
  for (const auto& part : y.split(x.size(2), -1)) out.push_back(split_heads(part));
  return out;
}

torch::Tensor MultiheadAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k,
                                             const torch::Tensor& v,
                                             const torch::Tensor& key_padding_mask, bool causal) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), S = k.size(2), D = q.size(3), C = H * D;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  auto q3 = q.reshape({B * H, T, D});  // as torch::matmul folds (B,H,T,D) x (B,H,D,S), bit for bit
  auto k3t = k.transpose(-2, -1).reshape({B * H, D, S});
  // bf16/fp16: the causal mask added by the product itself (beta = 1 onto -inf above the diagonal,
  // 0 below), no masked copy of the scores forward and none of their gradient backward. fp32 and
  // fp64 keep the masked product bit for bit (ATen's float baddbmm rounds otherwise).
  const bool mask_in_product = causal && is_reduced(q.scalar_type());
  auto scores = (mask_in_product ? torch::baddbmm(torch::full({T, S}, neg_inf, q.options()).triu(1), q3, k3t)
                                 : torch::bmm(q3, k3t))
                    .view({B, H, T, S});
  if (key_padding_mask.defined()) {
    scores = scores.masked_fill(key_padding_mask.view({B, 1, 1, S}), neg_inf);
  }
  if (causal && !mask_in_product) {
    scores = scores.masked_fill(torch::ones({T, S}, q.options().dtype(torch::kBool)).triu(1), neg_inf);
  }
  if (score_observer_) score_observer_(scores);
  auto probs = torch::softmax(scores, -1);
  probs = model::dropout(probs, attention_dropout_, is_training());
  auto context = torch::bmm(probs.reshape({B * H, T, S}), v.reshape({B * H, S, D}))
                     .view({B, H, T, D}).transpose(1, 2).reshape({B, T, C});  // (B,T,C)
  if (unit_softmax_mult_)
    context = context * unit_attention_output_scale(C / heads_, S, causal, *unit_softmax_mult_);
  return projected(out_proj, context);
}

torch::Tensor MultiheadAttentionImpl::forward(const torch::Tensor& query,
                                              const torch::Tensor& key_value,
                                              const torch::Tensor& key_padding_mask,
                                              bool causal) {
  if (query.is_same(key_value)) {  // self-attention: q, k and v in one product
    auto qkv = project(query, {&q_proj, &k_proj, &v_proj});
    return attend(scaled_query(qkv[0]), key(qkv[1]), qkv[2], key_padding_mask, causal);
  }
  auto q = scaled_query(split_heads(projected(q_proj, query)));
  auto kv = project(key_value, {&k_proj, &v_proj});
  return attend(q, key(kv[0]), kv[1], key_padding_mask, causal);
}

std::pair<torch::Tensor, KeyValues> MultiheadAttentionImpl::forward_prefill(const torch::Tensor& x) {
  TORCH_CHECK(!unit_softmax_mult_, "a --parametrisation u-mup model is not decoded step by step");
  auto qkv = project(x, {&q_proj, &k_proj, &v_proj});
  KeyValues kv{key(qkv[1]), qkv[2]};
  return {attend(scaled_query(qkv[0]), kv.k, kv.v, {}, /*causal=*/true), kv};
}

KeyValues MultiheadAttentionImpl::project_kv(const torch::Tensor& x) const {
  // Two products, not project(): a decoding step's input is one position, and stacking the
  // weights every step would copy them, and under bf16 cast the copy again (autocast caches
  // the casts of the weights themselves for the whole search).
  return {key(split_heads(linear(k_proj, x))), split_heads(linear(v_proj, x))};
}

torch::Tensor MultiheadAttentionImpl::step_query(const torch::Tensor& query) const {
  // u-muP's attention scale depends on the key count of the whole forward pass (the package's
  // decoder has no incremental decoding): a model of it is not decoded step by step.
  TORCH_CHECK(!unit_softmax_mult_, "a --parametrisation u-mup model is not decoded step by step");
  const int64_t N = query.size(0), C = query.size(2);
  return scaled_query(linear(q_proj, query).view({N, heads_, C / heads_}));
}

torch::Tensor MultiheadAttentionImpl::forward_step(const torch::Tensor& query, const EncoderMemory& memory) {
  auto q = step_query(query);
  if (!kernels::attention_step_fused(q)) {
    TORCH_CHECK(!memory.sentences.defined(), "attention step: a sentence table without the fused kernel");
    return attend_step(q, memory.kv, memory.bias);
  }
  auto context = kernels::encoder_attention_step(q, memory.kv.k, memory.kv.v, memory.bias, memory.sentences);
  return linear(out_proj, context.view({q.size(0), 1, -1}));
}

torch::Tensor MultiheadAttentionImpl::forward_step(const torch::Tensor& query, const SelfHistory& history) {
  auto q = step_query(query);
  if (!kernels::attention_step_fused(q)) return attend_step(q, history.dense(), {});
  auto context = kernels::self_attention_step(q, history.k, history.v, history.rows);  // (N,H,D)
  return linear(out_proj, context.view({q.size(0), 1, -1}));
}

torch::Tensor MultiheadAttentionImpl::attend_step(const torch::Tensor& q, const KeyValues& kv,
                                                  const torch::Tensor& bias) {
  const int64_t N = q.size(0), D = q.size(2), C = heads_ * D, B = kv.k.size(0), L = kv.k.size(2);
  TORCH_CHECK(N % B == 0, "attention step: ", N, " query rows for ", B, " key/value rows");
  const int64_t G = N / B;
  // (N,H,D) -> (B*H,G,D): a view when G = 1
  auto qg = q.view({B, G, heads_, D}).transpose(1, 2).reshape({B * heads_, G, D});
  auto k = kv.k.reshape({B * heads_, L, D}), v = kv.v.reshape({B * heads_, L, D});  // views of the cache
  auto scores = bias.defined() ? torch::baddbmm(bias.view({B * heads_, 1, L}), qg, k.transpose(1, 2))
                               : torch::bmm(qg, k.transpose(1, 2));  // (B*H,G,L)
  auto context = torch::bmm(torch::softmax(scores, -1), v);         // (B*H,G,D)
  return linear(out_proj, context.view({B, heads_, G, D}).transpose(1, 2).reshape({N, 1, C}));
}

}  // namespace normlab::model
