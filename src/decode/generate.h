// Text from a prompt with a decoder-only language model (docs/generate.md): greedy decoding,
// beam search (decode/beam_search.h's, fairseq's semantics) or sampling with temperature,
// top-k and top-p (Hugging Face transformers' order and definitions), from a seed. The
// decoder runs incrementally (model/decoder_cache.h): each prompt once, then one position a
// step for all its beams or samples.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/batch.h"
#include "decode/beam_search.h"
#include "model/decoder_only.h"

namespace normlab::decode {

struct SamplingConfig {
  bool enabled = false;      // --sampling: draw each token; else greedy (beam 1) or beam search
  double temperature = 1.0;  // logits / temperature
  int64_t top_k = 0;         // keep the k most likely tokens (0: all)
  double top_p = 1.0;        // keep the fewest most likely tokens whose probability reaches p
  uint64_t seed = 1;
};

struct GenerateConfig {
  // beam, lenpen, min_len, nbest as translate's; max_len_a and max_len_b are not read.
  BeamSearchConfig search{1};
  SamplingConfig sampling;
  int64_t max_new_tokens = 100;  // tokens added to a prompt, the </s> that ends one not counted
  int64_t num_samples = 1;       // sampled continuations per prompt (--sampling)
  bool ignore_eos = false;       // greedy / sampling: </s> is a token like any other (a new line)
  std::vector<std::string> validate() const;  // every problem, naming the option
};

// Throws std::invalid_argument, one line, for a model the cached decoder cannot run: --parametrisation
// u-mup (its attention scale depends on the whole sequence's length, model/unit_scaling.h).
void check_decodable(const model::ModelConfig& model);

// How many tokens a prompt of `prompt_length` tokens can gain before the model's positions end
// (max_positions - prompt_length; one fewer for beam search, whose </s> takes a position).
int64_t new_token_room(const model::ModelConfig& model, int64_t prompt_length, const GenerateConfig& config);

// The continuations of every prompt, in prompt order: `nbest` hypotheses (beam search, beam > 1)
// or `num_samples` (greedy: 1), each without the prompt. Beam search ends every hypothesis with
// </s>, forced after max_new_tokens tokens (fairseq), or as many as new_token_room. Greedy decoding and sampling stop at </s>
// (unless ignore_eos) or after max_new_tokens tokens, then without </s>. positional_scores are
// the model's log p of each token (and of the </s>, when there is one), before temperature and
// truncation; score is their sum / (their count)^lenpen.
// The context of a prompt is `</s> prompt` (the line before it ended, as in running text).
// Prompts of one length are decoded together; the same prompts, options and seed give the
// same text. Evaluation mode and no autograd are set here.
std::vector<std::vector<Hypothesis>> generate(model::DecoderOnly& model, const std::vector<data::Sentence>& prompts,
                                              const GenerateConfig& config);

}  // namespace normlab::decode
