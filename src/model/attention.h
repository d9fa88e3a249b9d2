// Multi-head scaled dot-product attention with fairseq's parameter names. Knows nothing of
// normalisation schemes: the ResidualBlock around it does.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

namespace normlab::model {

class MultiheadAttentionImpl : public torch::nn::Module {
 public:
  MultiheadAttentionImpl(int64_t d_model, int64_t heads, double attention_dropout);

  // query (B,T,C) attends to key_value (B,S,C). key_padding_mask (B,S) bool, true at padding,
  // or undefined; causal masks keys after the query's own position (needs T == S).
  // Returns (B,T,C).
  torch::Tensor forward(const torch::Tensor& query, const torch::Tensor& key_value,
                        const torch::Tensor& key_padding_mask, bool causal);

  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, out_proj{nullptr};

 private:
  int64_t heads_;
  double attention_dropout_;
};
TORCH_MODULE(MultiheadAttention);

}  // namespace normlab::model
