// `normlab translate`'s beam search on a file of token ids, timed without model loading, with
// an optional trace of every ATen operator (LibTorch's profiler; bench/profile_ops.py sums it
// per operator). bench/decode.py times `normlab translate` itself against CTranslate2; this
// binary is for the profile behind docs/performance.md's decoding section.
//
//   build/normlab_decode_bench --checkpoint ckpt.pt --ids src.ids --beam 5 --profile /tmp/d.trace
//   python3 bench/profile_ops.py /tmp/d.trace
#include <chrono>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include "core/runtime.h"
#include "data/id_text.h"
#include "decode/beam_search.h"
#include "model/checkpoint.h"

using namespace normlab;

int main(int argc, char** argv) {
  CLI::App app{"normlab decoding benchmark"};
  std::string checkpoint, ids, precision = "fp32", profile;
  decode::BeamSearchConfig beam;
  int64_t max_tokens = 4096, sentences = 0;
  int threads = 1;
  app.add_option("--checkpoint", checkpoint, "normlab checkpoint")->required();
  app.add_option("--ids", ids, "source token ids, one sentence a line")->required();
  app.add_option("--sentences", sentences, "only the first N lines (0: all)")->capture_default_str();
  app.add_option("--beam", beam.beam)->capture_default_str();
  app.add_option("--max-len-b", beam.max_len_b)->capture_default_str();
  app.add_option("--max-tokens", max_tokens)->capture_default_str();
  app.add_option("--threads", threads, "0: automatic")->capture_default_str();
  app.add_option("--precision", precision, "fp32|bf16")->capture_default_str();
  app.add_option("--profile", profile, "write a Chrome trace of the decoding (bench/profile_ops.py sums it)");
  CLI11_PARSE(app, argc, argv);

  core::configure_memory();  // as normlab does
  core::configure_threads(threads);
  auto loaded = model::load_model(checkpoint);
  auto net = model::as_encoder_decoder(loaded.model, "decode_step");
  net->set_precision(model::parse_precision(precision));
  auto sources = data::read_id_file(ids, net->config().src_vocab_size);
  if (sentences > 0 && static_cast<size_t>(sentences) < sources.size()) sources.resize(static_cast<size_t>(sentences));

  const auto start = std::chrono::steady_clock::now();
  int64_t tokens = 0;
  {
    std::unique_ptr<torch::autograd::profiler::RecordProfile> recording;
    if (!profile.empty()) recording = std::make_unique<torch::autograd::profiler::RecordProfile>(profile);
    for (const auto& h : decode::translate(net, sources, beam, max_tokens))
      if (!h.empty()) tokens += static_cast<int64_t>(h.front().tokens.size()) + 1;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << nlohmann::json{{"impl", "normlab"}, {"beam", beam.beam}, {"precision", precision},
                              {"sentences", sources.size()}, {"output_tokens", tokens}, {"seconds", secs},
                              {"sentences_per_second", static_cast<double>(sources.size()) / secs}}
                   .dump()
            << "\n";
  return 0;
}
