// One training step (forward, label-smoothed loss, backward, Adam) of a preset model on a
// batch of random ids, timed over repeats. Prints one JSON line; bench/train_step.py runs it
// beside the PyTorch peer and writes docs/performance.md. With --model-kind decoder-only: a causal
// LM (the preset's decoder depth, --form) on blocks of `length` tokens, plain cross-entropy and
// AdamW (0.9, 0.95, weight decay 0.1), as nanoGPT trains.
#include <algorithm>
#include <chrono>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include "core/runtime.h"
#include "core/tokens.h"
#include "model/model.h"
#include "train/criterion.h"
#include "train/optimizer.h"

using namespace normlab;

int main(int argc, char** argv) {
  CLI::App app{"normlab training-step benchmark"};
  std::string scheme = "post-ln", preset = "iwslt-small", device_name = "auto", precision = "fp32";
  std::string kind = model::kEncoderDecoder, form = "fairseq";
  double dropout = 0.3;
  int64_t vocab = 10000, sentences = 128, length = 32, warmup = 2, steps = 10;
  int threads = 0;
  app.add_option("--scheme", scheme)->capture_default_str();
  app.add_option("--preset", preset)->capture_default_str();
  app.add_option("--model-kind", kind, "encoder-decoder|decoder-only")->capture_default_str();
  app.add_option("--form", form, "fairseq|gpt2")->capture_default_str();
  app.add_option("--dropout", dropout)->capture_default_str();
  app.add_option("--vocab-size", vocab)->capture_default_str();
  app.add_option("--sentences", sentences, "sentences per batch")->capture_default_str();
  app.add_option("--length", length, "tokens per source and target sentence")->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps")->capture_default_str();
  app.add_option("--steps", steps, "timed steps")->capture_default_str();
  app.add_option("--threads", threads, "0: automatic")->capture_default_str();
  app.add_option("--device", device_name)->capture_default_str();
  app.add_option("--precision", precision, "fp32|bf16|fp16")->capture_default_str();
  std::string profile;
  app.add_option("--profile", profile,
                 "write a Chrome trace of the timed steps (LibTorch's profiler; bench/profile_ops.py sums it)");
  CLI11_PARSE(app, argc, argv);

  core::configure_memory();  // as normlab does
  const int used_threads = core::configure_threads(threads);
  const auto device = core::resolve_device(device_name);
  model::ModelConfig c;
  const bool lm = kind == model::kDecoderOnly;
  c.kind = kind;
  model::apply_preset(preset, c);
  if (lm) c.encoder_layers = 0;
  c.dropout = dropout;
  c.scheme = model::scheme_by_name(scheme);
  if (c.scheme.init == model::InitMethod::kAdminProfile) c.scheme.init = model::InitMethod::kAdminClosedForm;
  model::apply_form(form, c);
  c.src_vocab_size = c.tgt_vocab_size = vocab;
  auto net = model::create_model(c);
  model::initialize(net, 1);
  net->to(device);
  net->train();
  net->set_precision(model::parse_precision(precision));
  // normlab's own Adam (what `normlab train --optimizer adam` runs), as torch.optim.Adam.
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& p : net->named_parameters()) named.emplace_back(p.key(), p.value());
  train::OptimizerConfig adam_config;
  adam_config.kind = lm ? train::OptimizerKind::kAdamW : train::OptimizerKind::kAdam;
  if (lm) {  // nanoGPT's train.py: AdamW, betas (0.9, 0.95), weight decay 0.1
    adam_config.betas = {0.9, 0.95};
    adam_config.weight_decay = 0.1;
  }
  train::Optimizer adam(named, adam_config);

  torch::manual_seed(2);
  auto ids = [&] { return torch::randint(kNumSpecialTokens, vocab, {sentences, length}, torch::kInt64); };
  auto src = ids().to(device);
  auto target = ids().to(device);
  auto prev = torch::cat({torch::full({sentences, 1}, kEos, torch::kInt64).to(device),
                          target.slice(1, 0, length - 1)}, 1);
  if (lm) src = src.slice(1, 0, 0);  // a causal LM reads prev (the block) and predicts target (shifted)
  const data::Batch batch{src, prev, target, sentences * length};  // no padding
  // The PyTorch peer's loss: label smoothing 0.1 (fairseq's translation) or plain cross-entropy (nanoGPT).
  const train::LossOptions options{lm ? 0.0 : 0.1, train::LabelSmoothingFormula::kUniform};

  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize();
  };
  std::vector<double> seconds, forward_s, backward_s, optimizer_s;
  auto step = [&] {
    auto t0 = Clock::now();
    adam.zero_grad();
    const auto sums = train::loss(net, batch, options).sums;
    sync();
    forward_s.push_back(since(t0));
    auto t1 = Clock::now();
    (sums.loss / static_cast<double>(sums.tokens)).backward();
    sync();
    backward_s.push_back(since(t1));
    auto t2 = Clock::now();
    adam.step(5e-4);
    sync();
    optimizer_s.push_back(since(t2));
    seconds.push_back(since(t0));
  };
  for (int64_t i = 0; i < warmup; ++i) step();
  for (auto* v : {&seconds, &forward_s, &backward_s, &optimizer_s}) v->clear();
  {
    std::unique_ptr<torch::autograd::profiler::RecordProfile> recording;
    if (!profile.empty()) recording = std::make_unique<torch::autograd::profiler::RecordProfile>(profile);
    for (int64_t i = 0; i < steps; ++i) step();
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::cout << nlohmann::json{{"impl", "normlab"},
                              {"threads", used_threads},
                              {"device", device.str()},
                              {"precision", precision},
                              {"step_seconds", seconds},
                              {"median_seconds", median(seconds)},
                              {"forward_seconds", median(forward_s)},
                              {"backward_seconds", median(backward_s)},
                              {"optimizer_seconds", median(optimizer_s)},
                              {"tokens", sentences * length}}
                   .dump()
            << "\n";
  return 0;
}
