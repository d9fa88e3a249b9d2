// The model flags shared by subcommands that build a model: --scheme, --preset, sizes,
// scheme overrides, dropout. Every explicit flag overrides the preset and the scheme.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <torch/types.h>

#include "model/config.h"

namespace normlab::app {

// --dtype: float32|float64. Throws std::invalid_argument for anything else.
torch::Dtype parse_dtype(const std::string& s);

// A command whose model comes from a checkpoint refuses model flags, each of which would be
// ignored: throws std::invalid_argument "--d-model, --heads: the model comes from --checkpoint
// CKPT; drop them", where `source` is "the model comes from --checkpoint CKPT". Nothing when
// `flags` is empty.
void refuse_model_flags(const std::vector<std::string>& flags, const std::string& source);

// --classifier-pooling cls|mean into `value` (as given; empty when not given), in `group`.
CLI::Option* add_classifier_pooling_option(CLI::App& command, std::string& value, const std::string& group);
// The pooling `value` names; nothing when empty.
std::optional<model::ClassifierPooling> classifier_pooling(const std::string& value);

class ModelOptions {
 public:
  // `vocab_options`: --vocab-size/--src-vocab-size/--tgt-vocab-size (not for commands whose
  // vocabulary comes from data).
  void add_to(CLI::App& command, bool vocab_options = true);
  // The resolved, validated configuration. Throws std::invalid_argument listing every problem.
  // With `vocab_from_data` the vocabulary sizes are left 0 for the caller to fill in.
  model::ModelConfig resolve(bool vocab_from_data = false) const;
  const std::string& scheme_name() const { return scheme_; }  // --scheme as given
  const std::string& init_name() const { return init_; }      // --init as given (may be empty)
  int64_t classes() const { return sizes_.classes; }          // --num-classes (0 when not given)
  // --classifier-pooling (nothing when not given)
  std::optional<model::ClassifierPooling> pooling() const { return classifier_pooling(pooling_); }
  // The explicit scheme flags, for commands that build several named schemes (--schemes).
  // Throws std::invalid_argument for an unknown value.
  model::SchemeOverrides scheme_overrides() const;
  // The model flags given on the command line, in the help's order, but those in `except`.
  std::vector<std::string> given(const std::vector<std::string>& except = {}) const;

 private:
  std::string kind_ = model::kEncoderDecoder;
  std::string scheme_ = "post-ln";
  std::string preset_ = "iwslt-small";
  std::string norm_, residual_, init_, norm_kind_;
  double mix_alpha_ = model::kDefaultMixLnAlpha;
  bool ln_scaling_ = false, qk_norm_ = false;
  CLI::Option* mix_alpha_opt_ = nullptr;
  std::string share_ = "decoder", embed_init_ = "normal";
  std::string form_ = "fairseq", positions_, activation_;  // positions_, activation_: as given (may be empty)
  bool no_scale_embedding_ = false;
  std::string parametrisation_ = "sp";
  std::string pooling_;  // --classifier-pooling as given (may be empty)
  model::ModelConfig sizes_;  // holds the explicit size and dropout flags
  int64_t vocab_size_ = 0;
  int64_t layers_ = 0;  // --layers: encoder and decoder
  std::vector<const CLI::Option*> options_;  // every flag add_to() added
  CLI::Option *layers_opt_ = nullptr, *d_model_ = nullptr, *ffn_dim_ = nullptr, *heads_ = nullptr,
              *encoder_layers_ = nullptr, *decoder_layers_ = nullptr, *src_vocab_ = nullptr,
              *tgt_vocab_ = nullptr;
};

}  // namespace normlab::app
