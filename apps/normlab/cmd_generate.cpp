// `normlab generate`: a decoder-only model's continuations of prompts (docs/generate.md):
// greedy, beam search, or sampling with temperature, top-k and top-p from a seed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "commands.h"
#include "core/file_io.h"
#include "core/problems.h"
#include "core/runtime.h"
#include "core/tokens.h"
#include "data/corpus.h"
#include "data/id_text.h"
#include "decode/generate.h"
#include "decode_options.h"
#include "precision_option.h"

namespace normlab::app {
namespace {

using Clock = std::chrono::steady_clock;

struct GenerateOptions {
  std::string checkpoint, input, output, vocab, format = "text";
  std::optional<std::string> prompt;
  decode::GenerateConfig config;
  bool scores = false, ids = false;
  std::string precision = "fp32";
};

void add_options(CLI::App& cmd, GenerateOptions& o) {
  cmd.add_option("--checkpoint", o.checkpoint, "normlab checkpoint of a decoder-only model")->required();
  cmd.add_option("--prompt", o.prompt, "the text to continue (default: none, i.e. a new line)");
  cmd.add_option("--input", o.input, "prompts, one a line, plain or .gz (-: stdin), instead of --prompt");
  cmd.add_option("--output", o.output, "write the continuations here (atomically) instead of stdout");
  cmd.add_option("--vocab", o.vocab, "SentencePiece model (default: the checkpoint's own)");
  cmd.add_option("--format", o.format, "text: the continuations; jsonl: one JSON object each, with tokens and scores")
      ->capture_default_str()->check(CLI::IsMember({"text", "jsonl"}));
  cmd.add_flag("--scores", o.scores, "text: prefix each continuation with its score and a TAB");
  cmd.add_flag("--ids", o.ids, "--input and the output are token ids (no vocabulary)");
  auto& c = o.config;
  const std::string g = "Decoding";
  cmd.add_option("--max-new-tokens", c.max_new_tokens, "tokens added to each prompt (its ending </s> not counted)")
      ->capture_default_str()->group(g);
  cmd.add_option("--min-len", c.search.min_len, "no </s> before this many new tokens")->capture_default_str()->group(g);
  cmd.add_flag("--ignore-eos", c.ignore_eos, "greedy/sampling: go on past </s> (a new line), to --max-new-tokens")
      ->group(g);
  cmd.add_option("--beam", c.search.beam, "beam size (1: greedy)")->capture_default_str()->group(g);
  cmd.add_option("--nbest", c.search.nbest, "beam search: hypotheses printed per prompt, best first")
      ->capture_default_str()->group(g);
  cmd.add_option("--lenpen", c.search.lenpen, "score = sum(log p) / len^lenpen")->capture_default_str()->group(g);
  cmd.add_flag("--sampling", c.sampling.enabled, "draw each token instead of taking the most likely")->group(g);
  cmd.add_option("--temperature", c.sampling.temperature, "sampling: logits / T")->capture_default_str()->group(g);
  cmd.add_option("--top-k", c.sampling.top_k, "sampling: only the k most likely tokens (0: all)")
      ->capture_default_str()->group(g);
  cmd.add_option("--top-p", c.sampling.top_p, "sampling: only the most likely tokens holding probability p")
      ->capture_default_str()->group(g);
  cmd.add_option("--num-samples", c.num_samples, "sampling: continuations per prompt")->capture_default_str()->group(g);
  cmd.add_option("--seed", c.sampling.seed, "sampling: random seed")->capture_default_str()->group(g);
}

// The continuation as text: its pieces detokenised, each </s> (--ignore-eos) a new line.
std::string continuation_text(const data::Sentence& tokens, const data::Vocab* vocab) {
  std::string text;
  data::Sentence line;
  const auto flush = [&] {
    if (vocab) {
      text += vocab->decode(line);
    } else {
      for (auto id : line) text += (text.empty() || text.back() == '\n' ? "" : " ") + std::to_string(id);
    }
    line.clear();
  };
  for (auto id : tokens) {
    if (id != kEos) {
      line.push_back(id);
      continue;
    }
    flush();
    text += "\n";
  }
  flush();
  return text;
}

std::string render(const std::vector<std::vector<decode::Hypothesis>>& hyps, const GenerateOptions& o,
                   const data::Vocab* vocab) {
  std::string out;
  for (size_t p = 0; p < hyps.size(); ++p) {
    for (size_t k = 0; k < hyps[p].size(); ++k) {
      const auto& h = hyps[p][k];
      const auto text = continuation_text(h.tokens, vocab);
      if (o.format == "jsonl") {
        const bool ended = h.positional_scores.size() > h.tokens.size();
        out += nlohmann::json{{"prompt", p + 1}, {"rank", k + 1}, {"text", text}, {"tokens", h.tokens},
                              {"ended", ended}, {"score", h.score}, {"positional_scores", h.positional_scores}}
                   .dump() + "\n";
        continue;
      }
      if (o.scores) {
        char score[32];
        std::snprintf(score, sizeof score, "%.10g\t", h.score);
        out += score;
      }
      out += text + "\n";
      if (o.config.ignore_eos) out += "---\n";  // a continuation spans lines: nanoGPT's separator
    }
  }
  return out;
}

std::vector<data::Sentence> read_prompts(const GenerateOptions& o, const data::Vocab* vocab, int64_t vocab_size) {
  if (o.prompt && !o.input.empty()) throw std::invalid_argument("give --prompt or --input, not both");
  if (o.ids) {
    if (o.prompt) throw std::invalid_argument("--ids reads token ids from --input (a file, or - for stdin), not --prompt");
    return data::read_id_file(o.input.empty() || o.input == "-" ? "/dev/stdin" : o.input, vocab_size);
  }
  if (o.input.empty()) return {vocab->encode(o.prompt.value_or(""))};
  std::vector<data::Sentence> prompts;
  for (const auto& line : data::read_text_lines(o.input)) prompts.push_back(vocab->encode(line));
  return prompts;
}

// Prompts so long that the model's positions end before --max-new-tokens: said, not hidden.
void note_short_rooms(const std::vector<data::Sentence>& prompts, const model::ModelConfig& m,
                      const decode::GenerateConfig& c) {
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto room = decode::new_token_room(m, static_cast<int64_t>(prompts[i].size()), c);
    // A prompt without room for --min-len tokens is refused by decode::generate instead.
    if (room < c.max_new_tokens && room >= std::max<int64_t>(1, c.search.min_len))
      std::fprintf(stderr, "normlab generate: note: prompt %zu has %zu tokens; the model's max_positions %lld leave "
                   "room for %lld new tokens, fewer than --max-new-tokens %lld\n", i + 1, prompts[i].size(),
                   static_cast<long long>(m.max_positions), static_cast<long long>(room),
                   static_cast<long long>(c.max_new_tokens));
  }
}

}  // namespace

Runner add_generate_command(CLI::App& app, const GlobalOptions& global) {
  auto* cmd = app.add_subcommand("generate", "continue prompts with a decoder-only model (docs/generate.md)");
  auto o = std::make_shared<GenerateOptions>();
  add_options(*cmd, *o);
  add_precision_option(*cmd, o->precision, /*decoding=*/true);
  return [o, &global] {
    core::throw_if_problems(o->config.validate());
    auto loaded = model::load_model(o->checkpoint);
    auto net = model::as_decoder_only(loaded.model, "normlab generate");
    decode::check_decodable(net->config());
    std::optional<data::Vocab> vocab;
    if (!o->ids) vocab.emplace(checkpoint_vocab(loaded, o->checkpoint, o->vocab));
    const auto prompts = read_prompts(*o, vocab ? &*vocab : nullptr, net->config().tgt_vocab_size);
    note_short_rooms(prompts, net->config(), o->config);
    const auto device = core::resolve_device(global.device);
    net->to(device);
    const auto master = net->parameters().front().scalar_type();
    net->set_precision(resolve_precision(o->precision, device, master, /*decoding=*/true));
    const auto start = Clock::now();
    const auto hyps = decode::generate(net, prompts, o->config);
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    int64_t tokens = 0;
    for (const auto& prompt : hyps)
      for (const auto& h : prompt) tokens += static_cast<int64_t>(h.positional_scores.size());
    const auto out = render(hyps, *o, vocab ? &*vocab : nullptr);
    if (o->output.empty()) {
      std::cout << out << std::flush;
    } else {
      core::write_file_atomic(o->output, out);
    }
    std::fprintf(stderr, "normlab generate: %zu prompts, %lld new tokens (with </s>) in %.2f s: %.1f tokens/s\n",
                 prompts.size(), static_cast<long long>(tokens), secs, static_cast<double>(tokens) / secs);
  };
}

}  // namespace normlab::app
