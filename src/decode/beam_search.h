// Beam search with fairseq's SequenceGenerator semantics (REFERENCE §3; docs/translate.md
// lists every difference): 2*beam candidates per step, a hypothesis finished when one of the
// top `beam` candidates is </s>, score sum(log p) / len^lenpen with </s> counted in len, a
// sentence done once it holds `beam` finished hypotheses. beam 1 is greedy decoding.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "data/batch.h"
#include "data/vocab.h"
#include "model/seq2seq.h"

namespace normlab::decode {

struct BeamSearchConfig {
  int64_t beam = 5;         // hypotheses kept per sentence
  double lenpen = 1.0;      // length penalty exponent (0: raw sum of log-probabilities)
  double max_len_a = 0.0;   // max output tokens (without </s>) = a * source length + b, where the
  int64_t max_len_b = 200;  // source length counts its </s>; capped at max_positions - 1
  int64_t min_len = 1;      // </s> forbidden before this many tokens (fairseq's --min-len)
  int64_t nbest = 1;        // hypotheses returned per sentence, best first (<= beam)
  std::vector<std::string> validate() const;  // every problem, naming the option
};

struct Hypothesis {
  data::Sentence tokens;                 // without </s>
  double score = 0;                      // sum(log p) / (tokens.size() + 1)^lenpen
  std::vector<double> positional_scores; // log p of each token, then of </s>
};

// src (B,S): rows `x </s>` right-padded with pad, on the model's device. Returns per row up
// to nbest hypotheses, best first (empty only when max_len leaves no room, e.g. a=0, b=0).
// Runs the encoder once and decodes incrementally (model/decoder_cache.h). Evaluation
// mode and no autograd are the caller's business (translate() sets both).
std::vector<std::vector<Hypothesis>> beam_search(model::Seq2Seq& model, const torch::Tensor& src,
                                                 const BeamSearchConfig& config);

// The search itself, for any decoder (beam_search's, and decode/generate.h's language model):
// B sentences, `first[b]` the next input token of sentence b, whose earlier positions `cache`
// holds in B * beam rows (each sentence's beams consecutive); sentence b may add up to
// max_len[b] tokens before its </s>. Hypotheses hold the tokens after `first`. The caller holds
// the precision guard, the packed weights, evaluation mode and no autograd.
std::vector<std::vector<Hypothesis>> search(model::DecoderImpl& decoder, model::DecoderCache& cache,
                                            const std::vector<int64_t>& first, const std::vector<int64_t>& max_len,
                                            const BeamSearchConfig& config);

// Token batches for decoding (fairseq-generate: by source length only, as the target is not
// known): the sentences, sorted by length, cut so that sentences * longest (with </s>) <=
// max_tokens, decoded, and returned in input order. Empty sentences are not decoded and get
// no hypothesis. `progress(done, total)` is called after each batch when given.
std::vector<std::vector<Hypothesis>> translate(
    model::Seq2Seq& model, const std::vector<data::Sentence>& sources, const BeamSearchConfig& config,
    int64_t max_tokens, const std::function<void(size_t, size_t)>& progress = {});

// The best hypothesis of every sentence, detokenised; "" for a sentence without one.
std::vector<std::string> best_texts(const std::vector<std::vector<Hypothesis>>& hyps,
                                    const data::Vocab& vocab);

}  // namespace normlab::decode
