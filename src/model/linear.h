// y = x Wᵀ + b, the one place the model's linear layers run.
//
// By default through ATen's at::linear: one addmm over the flattened rows, as Python's F.linear
// does. torch::nn::Linear::forward (LibTorch's C++ functional linear) instead computes a 3-D
// input as matmul followed by an in-place bias add: an extra element-wise pass forward, a bias
// reduction node backward, and more again in a double backward (docs/performance.md).
//
// Inside a PackedWeights scope (decoding), with gradients off and on the CPU, a module's
// weights are instead reordered once into oneDNN's blocked layout and every product runs
// oneDNN's inner product on them (what CTranslate2 and PyTorch's frozen inference graphs do):
// no per-call weight reorder, and oneDNN's kernels where they beat the BLAS (docs/performance.md,
// "weights packed once"). In an int8 scope (`--precision int8`) they are quantised to int8 once
// instead and multiplied by fbgemm (model/int8_linear.h).
#pragma once

#include <memory>

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/torch.h>

#include "model/precision.h"

namespace normlab::model {

// x (..., K), w (N, K), b (N) or undefined -> (..., N); under autocast in its dtype.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b = {});

inline torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return linear(x, layer->weight, layer->bias);
}

// relu(linear(layer, x)), the ReLU in the product's epilogue on the packed path (one pass less).
torch::Tensor linear_relu(const torch::nn::Linear& layer, const torch::Tensor& x);

// While alive on this thread, linear() with gradients off, on the CPU, in float32 or in the
// bf16 of a precision guard, runs on `module`'s parameters packed once per parameter and dtype
// (the cast from autocast's cache). Other operands (a weight built per call, float64, CUDA)
// take at::linear. Like a PrecisionGuard, the weights must not change while it is alive; an
// inner scope defers to the outer one. Inactive (at::linear throughout) where it does not pay:
// on a CPU without AVX-512 for float32 (measured slower there), without AVX-512 BW/VL/DQ for
// bf16 (oneDNN's bf16 reorder refuses such a CPU), or in a LibTorch without oneDNN.
// With `precision` int8 the parameters of float32 products are int8 instead, on every CPU
// (throws where fbgemm is missing: precision_problems refuses that first).
class PackedWeights {
 public:
  explicit PackedWeights(const torch::nn::Module& module, Precision precision = Precision::kFp32);
  ~PackedWeights();
  PackedWeights(const PackedWeights&) = delete;
  PackedWeights& operator=(const PackedWeights&) = delete;

  // The (weight, dtype) pairs packed so far by this scope (0 for an inner or inactive one).
  size_t packed() const;

  struct State;

  // Whether linear() runs this thread's scope's parameters in int8 now (an int8 scope, gradients
  // off): code that would stack weights per call multiplies them one by one instead.
  static bool int8_now();

 private:
  std::unique_ptr<State> state_;  // null when an outer scope is alive or oneDNN is missing
};

}  // namespace normlab::model
