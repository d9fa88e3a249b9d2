// Model configuration: sizes, dropout and the three orthogonal scheme settings.
// Torch-free so that the CLI and other modules can include it cheaply.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace normlab::model {

// Where LayerNorm sits relative to the residual addition (REFERENCE §1).
enum class NormPlacement { kPost, kPre, kNone };
// How the residual input is combined with the sub-layer output.
enum class ResidualForm { kPlain, kAdmin, kReZero, kDeepNorm };
// How parameters are initialised.
enum class InitMethod { kXavier, kTFixup, kAdminProfile, kAdminClosedForm, kReZero, kDeepNorm };
// Which embedding tables are one parameter.
enum class SharedEmbeddings { kAll, kDecoder, kNone };
// How token tables and an unshared output projection are initialised: N(0, C^-1/2) (fairseq,
// REFERENCE §1) or Xavier-uniform like every other matrix (the PyTorch translation tutorial's
// `xavier_uniform_` over all p.dim() > 1; docs/schemes.md).
enum class EmbeddingInit { kNormal, kXavier };

struct SchemeSettings {
  NormPlacement norm = NormPlacement::kPost;
  ResidualForm residual = ResidualForm::kPlain;
  InitMethod init = InitMethod::kXavier;
};

struct ModelConfig {
  int64_t d_model = 512;          // C
  int64_t ffn_dim = 1024;         // F
  int64_t heads = 4;              // H; C must be divisible by H
  int64_t encoder_layers = 6;     // N_e
  int64_t decoder_layers = 6;     // N_d
  int64_t src_vocab_size = 0;     // V_src, special tokens included
  int64_t tgt_vocab_size = 0;     // V_tgt
  int64_t max_positions = 1024;   // longest sentence (tokens, eos included)
  double dropout = 0.3;           // residual-branch and embedding dropout (fairseq IWSLT recipe)
  double attention_dropout = 0.0; // on attention probabilities
  double activation_dropout = 0.0;// after the FFN's ReLU
  SharedEmbeddings share = SharedEmbeddings::kDecoder;
  EmbeddingInit embed_init = EmbeddingInit::kNormal;
  SchemeSettings scheme;
  double rezero_alpha_init = 0.0; // ReZero's alpha at init (0 in the paper; tests set others)

  // Every problem at once, one message each (empty when valid).
  std::vector<std::string> problems() const;
  // Throws std::invalid_argument joining problems() when there are any.
  void validate() const;
};

// Names as written on the command line and in JSON.
std::string to_string(NormPlacement v);
std::string to_string(ResidualForm v);
std::string to_string(InitMethod v);
std::string to_string(SharedEmbeddings v);
std::string to_string(EmbeddingInit v);
// Parsers throw std::invalid_argument naming `option`, the value and the choices.
NormPlacement parse_norm_placement(const std::string& s, const std::string& option = "--norm");
ResidualForm parse_residual_form(const std::string& s, const std::string& option = "--residual");
InitMethod parse_init_method(const std::string& s, const std::string& option = "--init");
SharedEmbeddings parse_shared_embeddings(const std::string& s,
                                         const std::string& option = "--share");
EmbeddingInit parse_embedding_init(const std::string& s, const std::string& option = "--embed-init");

// The papers' combinations: post-ln, pre-ln, t-fixup, admin, rezero, deepnorm.
SchemeSettings scheme_by_name(const std::string& name);
std::vector<std::string> scheme_names();
// The papers' sizes: iwslt-small, base, big, deep-narrow. Sets C, F, H and layer counts.
void apply_preset(const std::string& name, ModelConfig& config);
std::vector<std::string> preset_names();

void to_json(nlohmann::json& j, const ModelConfig& c);
void from_json(const nlohmann::json& j, ModelConfig& c);

}  // namespace normlab::model
