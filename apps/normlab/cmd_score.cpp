// `normlab score`: summed label-smoothed loss, nll and token count of id files, dropout off;
// optionally the gradient of the summed loss for every parameter.
#include <iomanip>
#include <iostream>
#include <numeric>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "commands.h"
#include "core/problems.h"
#include "core/runtime.h"
#include "core/tokens.h"
#include "data/id_text.h"
#include "model/checkpoint.h"
#include "precision_option.h"
#include "train/criterion.h"

namespace normlab::app {
namespace {

// A classifier's rows `<s> A </s>` or `<s> A </s> B </s>` (A from `src`, B from the same line of
// `second` when given and not empty) and their class ids (a target line: one id below the
// model's classes).
data::SentencePairs read_classified_ids(const model::ModelConfig& c, const std::string& src, const std::string& second,
                                        const std::string& tgt) {
  if (src.empty()) throw std::invalid_argument("--src-ids (sentence A of each example) is required for a classifier");
  data::SentencePairs rows{data::read_id_file(src, c.src_vocab_size), data::read_class_file(tgt, c.classes)};
  const auto b = second.empty() ? std::vector<data::Sentence>(rows.src.size())
                                : data::read_id_file(second, c.src_vocab_size);
  for (const auto& [path, n] : {std::pair{tgt, rows.tgt.size()}, std::pair{second, b.size()}})
    if (n != rows.src.size())
      throw std::invalid_argument(src + " has " + std::to_string(rows.src.size()) + " lines but " + path + " has " +
                                  std::to_string(n));
  for (size_t i = 0; i < rows.src.size(); ++i) {
    auto& row = rows.src[i];
    row.insert(row.begin(), kBos);
    row.push_back(kEos);
    if (!b[i].empty()) {
      row.insert(row.end(), b[i].begin(), b[i].end());
      row.push_back(kEos);
    }
  }
  return rows;
}

// A classifier's examples, an encoder-decoder's pairs, a decoder-only model's lines (with empty
// sources), or an encoder-only model's rows `<s> x` and their targets (`x` as given, the <mask> id allowed; a target line: the
// id to predict or -100 at each token of x).
data::SentencePairs read_scored_ids(const model::ModelConfig& c, const std::string& src, const std::string& second,
                                    const std::string& tgt) {
  if (c.classifier()) return read_classified_ids(c, src, second, tgt);
  if (!second.empty()) throw std::invalid_argument("--second-ids: sentence B of a classifier's examples; " +
                                                   std::string("this is not a classifier"));
  if (c.kind == model::kEncoderOnly) {
    if (src.empty()) throw std::invalid_argument("--src-ids (the masked inputs) is required for an " + c.kind + " model");
    data::SentencePairs rows{data::read_id_file(src, c.src_vocab_size), data::read_label_file(tgt, c.src_vocab_size)};
    if (rows.src.size() != rows.tgt.size())
      throw std::invalid_argument(src + " has " + std::to_string(rows.src.size()) + " lines but " + tgt + " has " +
                                  std::to_string(rows.tgt.size()));
    for (size_t i = 0; i < rows.src.size(); ++i) {
      if (rows.src[i].size() != rows.tgt[i].size())
        throw std::invalid_argument(tgt + ":" + std::to_string(i + 1) + ": " + std::to_string(rows.tgt[i].size()) +
                                    " targets for " + std::to_string(rows.src[i].size()) + " input tokens in " + src +
                                    " (one per input token: the id to predict, or -100)");
      rows.src[i].insert(rows.src[i].begin(), kBos);
      rows.tgt[i].insert(rows.tgt[i].begin(), kPad);
    }
    return rows;
  }
  if (c.has_encoder()) {
    if (src.empty()) throw std::invalid_argument("--src-ids is required for an " + c.kind + " model");
    return data::read_id_pairs(src, tgt, c.src_vocab_size, c.tgt_vocab_size);
  }
  if (!src.empty()) throw std::invalid_argument("--src-ids: a " + c.kind + " model has no source; give --tgt-ids only");
  data::SentencePairs lines;
  lines.tgt = data::read_id_file(tgt, c.tgt_vocab_size);
  lines.src.resize(lines.tgt.size());
  return lines;
}

// Rows [begin, end) as the model's kind reads them.
data::Batch scored_batch(const model::ModelConfig& c, const data::SentencePairs& pairs, size_t begin, size_t end) {
  if (c.classifier()) {
    std::vector<int64_t> indices(end - begin);
    std::iota(indices.begin(), indices.end(), static_cast<int64_t>(begin));
    return data::gather_batch(pairs.src, pairs.tgt, indices, data::Layout::kClassify);
  }
  return c.kind == model::kEncoderOnly ? data::masked_batch(pairs.src, pairs.tgt, begin, end)
                                       : data::make_batch(pairs.src, pairs.tgt, begin, end);
}

}  // namespace

Runner add_score_command(CLI::App& app, const GlobalOptions& global) {
  auto* cmd = app.add_subcommand("score", "loss of a model on id files (dropout off)");
  struct Options {
    std::string checkpoint, src, second, tgt, formula = "uniform", grad_out;
    double label_smoothing = 0.1;
    double z_loss = 0.0;
    int64_t batch_sentences = 64;
    bool json = false;
    std::string precision = "fp32";
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("--checkpoint", o->checkpoint, "normlab checkpoint")->required();
  cmd->add_option("--src-ids", o->src,
                  "source sentences as token ids, one per line (an encoder-decoder's; an encoder-only model's "
                  "masked inputs without <s>, whose --tgt-ids line holds the id to predict at each token or -100; "
                  "a classifier's sentence A, whose --tgt-ids line holds the class id)");
  cmd->add_option("--second-ids", o->second,
                  "a classifier's sentence B of each example as ids, one per line (an empty line: none)");
  cmd->add_option("--tgt-ids", o->tgt,
                  "target sentences as token ids, one per line (decoder-only: each line read as </s> y "
                  "predicting y </s>)")
      ->required();
  cmd->add_option("--label-smoothing", o->label_smoothing, "eps")->capture_default_str();
  cmd->add_option("--z-loss", o->z_loss, "C: the loss also holds C (log Z)^2 per target token")->capture_default_str();
  cmd->add_option("--ls-formula", o->formula, "uniform|exclusive (docs/conventions.md)")
      ->capture_default_str();
  cmd->add_option("--batch-sentences", o->batch_sentences, "sentences per forward pass")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--grad-out", o->grad_out, "write the gradient of the summed loss (name -> tensor)");
  add_precision_option(*cmd, o->precision);
  cmd->add_flag("--json", o->json, "print {\"loss\", \"nll\", \"tokens\"} as one JSON line");
  return [o, &global] {
    const train::LossOptions options{o->label_smoothing, train::parse_label_smoothing_formula(o->formula),
                                     o->z_loss};
    core::throw_if_problems(options.problems());
    auto loaded = model::load_model(o->checkpoint);
    auto& net = loaded.model;
    const auto& c = net->config();
    const auto pairs = read_scored_ids(c, o->src, o->second, o->tgt);
    const auto device = core::resolve_device(global.device);
    net->to(device);
    net->eval();
    net->set_precision(resolve_precision(o->precision, device));
    const bool grads = !o->grad_out.empty();
    torch::AutoGradMode grad_mode(grads);
    double loss = 0.0, nll = 0.0;
    int64_t tokens = 0;
    const auto n = pairs.src.size();
    for (size_t begin = 0; begin < n; begin += static_cast<size_t>(o->batch_sentences)) {
      const auto end = std::min(n, begin + static_cast<size_t>(o->batch_sentences));
      const auto batch = scored_batch(c, pairs, begin, end);
      const auto sums = train::loss(net, batch, options).sums;
      if (grads) sums.loss.backward();
      loss += sums.loss.item<double>();
      nll += sums.nll.item<double>();
      tokens += sums.tokens;
    }
    if (grads) {
      model::TensorMap g;
      for (const auto& [name, p] : model::named_parameters(net))
        g[name] = p.grad().defined() ? p.grad() : torch::zeros_like(p);
      model::save_tensors(o->grad_out, g);
    }
    if (o->json) {
      std::cout << nlohmann::json{{"loss", loss}, {"nll", nll}, {"tokens", tokens}}.dump() << "\n";
    } else {
      std::cout << std::setprecision(10) << "loss " << loss << "  nll " << nll << "  tokens "
                << tokens << "  loss/token " << loss / std::max<int64_t>(tokens, 1)
                << "  ppl " << std::exp(nll / std::max<int64_t>(tokens, 1)) << "\n";
    }
  };
}

}  // namespace normlab::app
