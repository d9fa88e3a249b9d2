// y = x Wᵀ + b through ATen's at::linear: one addmm over the flattened rows, as Python's
// F.linear does. torch::nn::Linear::forward (LibTorch's C++ functional linear) instead computes
// a 3-D input as matmul followed by an in-place bias add: an extra element-wise pass forward,
// a bias reduction node backward, and more again in a double backward (docs/performance.md).
#pragma once

#include <torch/nn/modules/linear.h>
#include <torch/torch.h>

namespace normlab::model {

inline torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return torch::linear(x, layer->weight, layer->bias);
}

}  // namespace normlab::model
