// The same model on every available device gives the same loss and gradients as on the CPU.
// Skips where this build or machine has no CUDA device.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/tokens.h"
#include "model/checkpoint.h"
#include "model/seq2seq.h"
#include "tiny_model.h"
#include "train/loss.h"

using namespace normlab;

TEST(Device, CudaMatchesCpuInFloat64) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto c = test::tiny_config("pre-ln");
  auto losses_and_grads = [&](const torch::Device& device) {
    model::Seq2Seq m(c);
    m->to(torch::kFloat64);
    model::initialize(m, 11);
    m->to(device);
    m->eval();
    auto src = torch::tensor(std::vector<int64_t>{5, 6, 7, kEos, 8, 9, kEos, kPad}).view({2, 4});
    auto prev = torch::tensor(std::vector<int64_t>{kEos, 10, 11, kEos, 12, kPad}).view({2, 3});
    auto tgt = torch::tensor(std::vector<int64_t>{10, 11, kEos, 12, kEos, kPad}).view({2, 3});
    auto sums = train::label_smoothed_nll(m->forward(src.to(device), prev.to(device)), tgt.to(device),
                                          0.1, train::LabelSmoothingFormula::kUniform, kPad);
    sums.loss.backward();
    model::TensorMap grads;
    for (const auto& p : m->named_parameters()) grads[p.key()] = p.value().grad().cpu();
    return std::make_pair(sums.loss.item<double>(), grads);
  };
  auto [cpu_loss, cpu_grads] = losses_and_grads(torch::kCPU);
  auto [gpu_loss, gpu_grads] = losses_and_grads(torch::Device(torch::kCUDA, 0));
  EXPECT_NEAR(cpu_loss, gpu_loss, 1e-10 * std::abs(cpu_loss));
  for (const auto& [name, g] : cpu_grads)
    EXPECT_TRUE(torch::allclose(g, gpu_grads.at(name), 1e-8, 1e-10)) << name;
}
