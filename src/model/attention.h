// Multi-head scaled dot-product attention with fairseq's parameter names. Knows nothing of
// normalisation schemes: the ResidualBlock around it does.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <initializer_list>
#include <vector>

namespace normlab::model {

// Keys and values (B,H,L,D) that incremental decoding keeps for one attention: the earlier
// target positions (self-attention, grows by one per step) or the encoder output (computed
// once). Undefined until the first step.
struct KeyValueCache {
  torch::Tensor k, v;
  void reorder(const torch::Tensor& index);  // rows (beams) index_select'ed along B
};

class MultiheadAttentionImpl : public torch::nn::Module {
 public:
  MultiheadAttentionImpl(int64_t d_model, int64_t heads, double attention_dropout);

  // query (B,T,C) attends to key_value (B,S,C). key_padding_mask (B,S) bool, true at padding,
  // or undefined; causal masks keys after the query's own position (needs T == S).
  // Returns (B,T,C).
  torch::Tensor forward(const torch::Tensor& query, const torch::Tensor& key_value,
                        const torch::Tensor& key_padding_mask, bool causal);
  // One decoding step: query (B,1,C) is the newest position. `static_kv`: key_value is the
  // encoder output, projected into `cache` on the first call and reused; otherwise key_value
  // is the query itself and its key/value are appended to `cache`. Returns (B,1,C).
  torch::Tensor forward_step(const torch::Tensor& query, const torch::Tensor& key_value,
                             const torch::Tensor& key_padding_mask, bool static_kv,
                             KeyValueCache& cache);

  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, out_proj{nullptr};

 private:
  // (B,T,C) -> (B,H,T,D)
  torch::Tensor split_heads(const torch::Tensor& x) const;
  // x (B,L,C) through the given projections as one matrix product (their weights stacked): one
  // read of x, one cast of it under mixed precision, and the input's gradient summed inside the
  // product. Returns each projection's (B,H,L,D).
  std::vector<torch::Tensor> project(const torch::Tensor& x,
                                     std::initializer_list<const torch::nn::Linear*> layers) const;
  // q (B,H,T,D) already scaled, k, v (B,H,S,D) -> (B,T,C)
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& key_padding_mask, bool causal);

  int64_t heads_;
  double attention_dropout_;
};
TORCH_MODULE(MultiheadAttention);

}  // namespace normlab::model
