// normlab's own CPU kernels of a bf16 training step, each timed alone at the bench step's shapes
// (bench/train_step.cpp: 128 x 32 target tokens, d 512, V 10000): the fused label-smoothing
// terms (model/kernels/log_softmax_terms.h), the fused residual + dropout (model/dropout.h) and
// the fused GELU in the tanh form (model/kernels/gelu_tanh.h; beside ATen's on the same tensor,
// tokens x 2 d_model), forward and backward. Minimum over --repeats of each. For before/after
// comparisons of a kernel (docs/performance.md); ATEN_CPU_CAPABILITY=avx2 selects the kernels'
// AVX2 builds on an AVX-512 CPU, as it does ATen's.
//
//   build/normlab_kernels_bench --threads 2
#include <algorithm>
#include <chrono>
#include <iostream>
#include <limits>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/runtime.h"
#include "model/dropout.h"
#include "model/kernels/gelu_tanh.h"
#include "model/kernels/log_softmax_terms.h"

using namespace normlab;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// {forward ms, backward ms}: the minimum of `repeats` runs of forward() and of the gradient of
// the sum of its outputs with respect to `input`.
template <class F>
std::pair<double, double> time_fwd_bwd(const torch::Tensor& input, int repeats, F&& forward) {
  double fwd = std::numeric_limits<double>::infinity(), bwd = fwd;
  for (int r = 0; r < repeats; ++r) {
    auto t = Clock::now();
    torch::Tensor loss = forward();
    fwd = std::min(fwd, ms_since(t));
    t = Clock::now();
    auto g = torch::autograd::grad({loss}, {input});
    bwd = std::min(bwd, ms_since(t));
  }
  return {fwd, bwd};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"normlab's CPU kernels, each alone"};
  int threads = 2, repeats = 10;
  int64_t tokens = 4096, vocab = 10000, d_model = 512;
  app.add_option("--threads", threads, "intra-op threads (0: automatic)")->capture_default_str();
  app.add_option("--repeats", repeats, "runs of each kernel; the minimum is reported")->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--tokens", tokens)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--vocab", vocab)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--d-model", d_model)->capture_default_str()->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  core::configure_memory();  // as normlab does
  core::configure_threads(threads);
  torch::manual_seed(1);

  nlohmann::json out{{"threads", at::get_num_threads()}, {"cpu_capability", core::runtime_info().cpu_capability},
                     {"repeats", repeats}};
  auto logits = (3 * torch::randn({tokens, vocab})).to(torch::kBFloat16).requires_grad_(true);
  if (model::kernels::log_softmax_terms_apply(logits)) {
    auto target = torch::randint(0, vocab, {tokens}, torch::kInt64);
    auto [fwd, bwd] = time_fwd_bwd(logits, repeats, [&] {
      auto terms = model::kernels::log_softmax_terms(logits, target);
      return (terms.nll + terms.smooth).sum();
    });
    out["log_softmax_terms"] = {{"shape", {tokens, vocab}}, {"forward_ms", fwd}, {"backward_ms", bwd}};
  }
  auto residual = torch::randn({tokens, d_model}).requires_grad_(true);
  auto branch = torch::randn({tokens, d_model}).to(torch::kBFloat16);
  auto [fwd, bwd] = time_fwd_bwd(residual, repeats, [&] { return model::dropout_add(residual, branch, 0.3, true).sum(); });
  out["dropout_add"] = {{"shape", {tokens, d_model}}, {"forward_ms", fwd}, {"backward_ms", bwd}};
  auto hidden = (2 * torch::randn({tokens, 2 * d_model})).to(torch::kBFloat16).requires_grad_(true);
  if (model::kernels::gelu_tanh_apply(hidden)) {
    auto gelu_sum = [&](auto&& gelu) {
      auto [f, b] = time_fwd_bwd(hidden, repeats, [&] { return gelu().sum(); });
      return nlohmann::json{{"shape", {tokens, 2 * d_model}}, {"forward_ms", f}, {"backward_ms", b}};
    };
    out["gelu_tanh"] = gelu_sum([&] { return model::kernels::gelu_tanh(hidden); });
    out["gelu_tanh_aten"] = gelu_sum([&] { return torch::gelu(hidden, "tanh"); });
  }
  std::cout << out.dump() << "\n";
  return 0;
}
