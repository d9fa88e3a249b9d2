// Two Linear layers, one with a bias and one without, for the tests of model/linear.h's products
// (linear_test.cpp) and their int8 form (int8_linear_test.cpp).
#pragma once

#include <torch/torch.h>

namespace normlab::test {

struct TwoLayers : torch::nn::Module {
  TwoLayers() {
    with_bias = register_module("with_bias", torch::nn::Linear(96, 200));
    without_bias = register_module("without_bias", torch::nn::Linear(torch::nn::LinearOptions(96, 130).bias(false)));
  }
  torch::nn::Linear with_bias{nullptr}, without_bias{nullptr};
};

}  // namespace normlab::test
