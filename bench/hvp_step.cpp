// One Hessian-vector product (double back-propagation, analysis/hvp.h) against one gradient
// on the same batch of random ids, timed alternately in one process, and the product with the
// batch's first-order graph kept (--keep-graphs: every product after the first); prints one
// JSON line with medians and the process's peak resident memory. bench/hvp_step.py runs it beside a
// PyTorch double-backward peer and writes docs/performance.md.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "analysis/hvp.h"
#include "core/runtime.h"
#include "core/tokens.h"
#include "model/seq2seq.h"

using namespace normlab;

int main(int argc, char** argv) {
  CLI::App app{"normlab Hessian-vector product benchmark"};
  std::string scheme = "post-ln";
  int64_t vocab = 8000, d_model = 512, ffn = 1024, heads = 4, layers = 6, sentences = 32, length = 16,
          repeats = 3;
  int threads = 1;
  app.add_option("--scheme", scheme)->capture_default_str();
  app.add_option("--vocab-size", vocab)->capture_default_str();
  app.add_option("--d-model", d_model)->capture_default_str();
  app.add_option("--ffn-dim", ffn)->capture_default_str();
  app.add_option("--heads", heads)->capture_default_str();
  app.add_option("--layers", layers, "encoder and decoder layers")->capture_default_str();
  app.add_option("--sentences", sentences)->capture_default_str();
  app.add_option("--length", length, "tokens per source and target sentence")->capture_default_str();
  app.add_option("--repeats", repeats, "timed gradient/HVP pairs (after one untimed pair)")->capture_default_str();
  app.add_option("--threads", threads)->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  core::configure_memory();  // as normlab does
  const int used_threads = core::configure_threads(threads);
  model::ModelConfig c;
  c.d_model = d_model;
  c.ffn_dim = ffn;
  c.heads = heads;
  c.encoder_layers = c.decoder_layers = layers;
  c.src_vocab_size = c.tgt_vocab_size = vocab;
  c.scheme = model::scheme_by_name(scheme);
  model::Seq2Seq net(c);
  model::initialize(net, 1);

  torch::manual_seed(2);
  std::vector<data::Sentence> src(sentences), tgt(sentences);
  for (int64_t i = 0; i < sentences; ++i) {
    auto s = torch::randint(kNumSpecialTokens, vocab, {length - 1}, torch::kInt64);
    auto t = torch::randint(kNumSpecialTokens, vocab, {length - 1}, torch::kInt64);
    src[i].assign(s.data_ptr<int64_t>(), s.data_ptr<int64_t>() + length - 1);  // + </s> = length
    tgt[i].assign(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + length - 1);
  }
  const auto batch = data::make_batch(src, tgt, 0, src.size());
  analysis::FullDataHessian h(net, {batch}, {}, ".*", torch::kCPU);
  analysis::FullDataHessian kept(net, {batch}, {}, ".*", torch::kCPU, /*keep_graphs=*/true);
  auto v = torch::randn({h.dim()});

  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  std::vector<double> grad_s, hvp_s, kept_s;
  for (int64_t r = 0; r <= repeats; ++r) {
    auto t0 = Clock::now();
    h.gradient();  // each result dropped at once, as Lanczos drops a product before the next
    const double tg = since(t0);
    t0 = Clock::now();
    h.hvp(v);
    const double th = since(t0);
    t0 = Clock::now();
    kept.hvp(v);  // r == 0 builds the kept graph
    const double tk = since(t0);
    if (r == 0) continue;  // warm-up
    grad_s.push_back(tg);
    hvp_s.push_back(th);
    kept_s.push_back(tk);
  }
  auto median = [](std::vector<double> x) {
    std::sort(x.begin(), x.end());
    return x[x.size() / 2];
  };
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::cout << nlohmann::json{{"impl", "normlab"},
                              {"threads", used_threads},
                              {"parameters", h.dim()},
                              {"tokens", h.tokens()},
                              {"gradient_seconds", grad_s},
                              {"hvp_seconds", hvp_s},
                              {"median_gradient_seconds", median(grad_s)},
                              {"median_hvp_seconds", median(hvp_s)},
                              {"kept_hvp_seconds", kept_s},
                              {"median_kept_hvp_seconds", median(kept_s)},
                              {"peak_rss_mb", usage.ru_maxrss / 1024.0}}
                   .dump()
            << "\n";
  return 0;
}
