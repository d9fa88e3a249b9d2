// Model configuration: sizes, dropout and the three orthogonal scheme settings.
// Torch-free so that the CLI and other modules can include it cheaply.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace normlab::model {

// Where the norm sits relative to the residual addition (REFERENCE §1, §10): post, pre,
// peri (a norm on the sub-layer's input and one on its output, Peri-LN / sandwich), mix
// (Mix-LN: post in the first floor(alpha L) layers of a stack, pre in the rest), none.
enum class NormPlacement { kPost, kPre, kPeri, kMix, kNone };
// Which norm (REFERENCE §10): LayerNorm, RMSNorm (Zhang & Sennrich 2019), DyT (Zhu et al. 2025).
enum class NormKind { kLayerNorm, kRMSNorm, kDyT };
// How the residual input is combined with the sub-layer output.
enum class ResidualForm { kPlain, kAdmin, kReZero, kDeepNorm };
// How parameters are initialised. kGpt2: GPT-2's (Radford et al. 2019; Hugging Face
// GPT2PreTrainedModel._init_weights, nanoGPT): every matrix and table N(0, 0.02), the residual
// branches' last projections N(0, 0.02 / sqrt(2 N)), biases 0. kBert: BERT's (Devlin et al. 2019;
// Hugging Face BertPreTrainedModel._init_weights): every matrix and table N(0, 0.02), biases 0.
enum class InitMethod { kXavier, kTFixup, kAdminProfile, kAdminClosedForm, kReZero, kDeepNorm, kGpt2, kBert };
// Which embedding tables are one parameter.
enum class SharedEmbeddings { kAll, kDecoder, kNone };
// How token tables and an unshared output projection are initialised: N(0, C^-1/2) (fairseq,
// REFERENCE §1) or Xavier-uniform like every other matrix (the PyTorch translation tutorial's
// `xavier_uniform_` over all p.dim() > 1; docs/schemes.md).
enum class EmbeddingInit { kNormal, kXavier };
// Where a token's position comes from: fairseq's sinusoidal table (REFERENCE §1), or a learned
// table of max_positions rows (GPT-2's wpe, BERT's position embeddings; row t for position t).
enum class PositionEmbedding { kSinusoidal, kLearned };
// The feed-forward activation: ReLU (fairseq's default), GELU (erf; BERT, fairseq's "gelu"),
// GELU's tanh approximation (GPT-2's "gelu_new", fairseq's "gelu_accurate").
enum class Activation { kRelu, kGelu, kGeluTanh };
// What an encoder-only classifier's head reads (--classifier-pooling; Hugging Face ModernBERT's
// `classifier_pooling`): the first position, <s> (BERT's [CLS], "cls"), or the mean of the last
// hidden states over the non-padding positions, <s> and </s> included ("mean").
enum class ClassifierPooling { kCls, kMean };
// How initialisation, forward multipliers and per-parameter learning rates scale with the width
// (docs/width.md): standard (sp, every other setting's own), or muP (Yang et al. 2021, "Tensor
// Programs V", Table 3 / Table 8 as the `mup` package implements them) relative to a base width
// C0, at which a mup model is the sp model (model/width.h), or u-muP (Blake et al. 2024, as the
// `unit-scaling` package implements it: unit-variance weights, forward scales, model/unit_scaling.h).
enum class Parametrisation { kSp, kMup, kUmup };

// u-muP's hyperparameters (Blake et al. 2024, Table 3: alpha_ffn-act, alpha_attn-softmax, alpha_res,
// alpha_res-attn-ratio, alpha_loss-softmax; docs/width.md), each the `mult` of the unit_scaling
// package function named beside it; all 1 is the package's default model.
struct UmupAlphas {
  double ffn_act = 1.0;              // U.gelu(x, mult): gelu(mult x) / mult, rescaled
  double attn_softmax = 1.0;         // U.scaled_dot_product_attention(mult): softmax(mult q.k / D)
  double residual = 1.0;             // transformer_residual_scaling_rule(residual_mult, .)
  double residual_attn_ratio = 1.0;  // transformer_residual_scaling_rule(., residual_attn_ratio)
  double loss_softmax = 1.0;         // U.cross_entropy(mult): softmax of mult x the logits
  bool defaults() const;  // every alpha 1 (model/unit_scaling.cpp walks umup_alpha_fields())
};

inline constexpr double kDefaultMixLnAlpha = 0.25;  // Li et al. 2024's choice (REFERENCE §10)

struct SchemeSettings {
  NormPlacement norm = NormPlacement::kPost;
  ResidualForm residual = ResidualForm::kPlain;
  InitMethod init = InitMethod::kXavier;
  NormKind norm_kind = NormKind::kLayerNorm;  // every norm of the model, QK-norm's included
  double mix_alpha = kDefaultMixLnAlpha;  // Mix-LN's alpha; used with NormPlacement::kMix
  bool ln_scaling = false;   // LayerNorm scaling (Sun et al. 2025): layer l's norms x 1/sqrt(l)
  bool qk_norm = false;      // a norm on each head's q and k (Dehghani et al. 2023)
};

// Explicit settings on top of a named scheme (the command line's --norm, --residual, --init,
// --norm-kind, --mix-ln-alpha, --ln-scaling, --qk-norm): a command applies them to every scheme
// it builds, --scheme's and each of --schemes' alike. The two switches only turn on.
struct SchemeOverrides {
  std::optional<NormPlacement> norm;
  std::optional<ResidualForm> residual;
  std::optional<InitMethod> init;
  std::optional<NormKind> norm_kind;
  std::optional<double> mix_alpha;
  bool ln_scaling = false;
  bool qk_norm = false;

  SchemeSettings apply(SchemeSettings s) const;
};

// The combinations of settings that make no sense, one message each (empty when valid).
std::vector<std::string> scheme_problems(const SchemeSettings& s);

// What a scheme means for layer `index` (0-based) of a stack of `count` layers: Mix-LN is
// post in the first floor(mix_alpha * count) layers and pre in the rest; every other
// placement is the same in every layer.
NormPlacement layer_placement(const SchemeSettings& s, int64_t index, int64_t count);
// The factor on the outputs of layer `index`'s norms: 1/sqrt(index + 1) with LayerNorm
// scaling (Sun et al. 2025: LN(x) / sqrt(l), l = index + 1 = 1..L), else 1.
double norm_output_scale(const SchemeSettings& s, int64_t index);
// Whether each stack ends in a norm of its own: pre, peri and mix do (their last layers leave
// the residual stream un-normalised).
bool has_final_norm(const SchemeSettings& s);

// The kind every model was before there were others (model.h's registry), and that
// configurations and checkpoints without a "kind" key are.
inline constexpr const char* kEncoderDecoder = "encoder-decoder";
// A single causal stack over one vocabulary (fairseq's transformer_lm; model/decoder_only.h): it
// has decoder layers without encoder attention, and no encoder (encoder_layers 0).
inline constexpr const char* kDecoderOnly = "decoder-only";
// A single bidirectional stack with a masked-LM head (BERT, fairseq's RoBERTa; model/encoder_only.h):
// encoder layers only (decoder_layers 0), one vocabulary whose last id is <mask>.
inline constexpr const char* kEncoderOnly = "encoder-only";

struct ModelConfig {
  std::string kind = kEncoderDecoder;  // the model kind's registered name (model.h)
  int64_t d_model = 512;          // C
  int64_t ffn_dim = 1024;         // F
  int64_t heads = 4;              // H; C must be divisible by H
  int64_t encoder_layers = 6;     // N_e (0 for a decoder-only model)
  int64_t decoder_layers = 6;     // N_d (a decoder-only model's layers)
  int64_t src_vocab_size = 0;     // V_src, special tokens included
  int64_t tgt_vocab_size = 0;     // V_tgt
  int64_t max_positions = 1024;   // longest sentence (tokens, eos included)
  double dropout = 0.3;           // residual-branch and embedding dropout (fairseq IWSLT recipe)
  double attention_dropout = 0.0; // on attention probabilities
  double activation_dropout = 0.0;// after the FFN's ReLU
  SharedEmbeddings share = SharedEmbeddings::kDecoder;
  EmbeddingInit embed_init = EmbeddingInit::kNormal;
  // The architecture's form (docs/schemes.md, "Forms"): fairseq's by default; GPT-2's is learned
  // positions, GELU (tanh) and token embeddings not scaled by sqrt(C) (`--form gpt2`).
  PositionEmbedding positions = PositionEmbedding::kSinusoidal;
  Activation activation = Activation::kRelu;
  bool scale_embedding = true;  // tokens x sqrt(C) (fairseq; its --no-scale-embedding turns it off)
  // BERT's embedding: a norm on the sum of token, position and segment vectors before dropout
  // (fairseq's layernorm_embedding), and a table of segment (token type) vectors: 0 none, 2 BERT's.
  bool embedding_norm = false;
  int64_t segment_types = 0;
  // An encoder-only model's classification head (RoBERTa's RobertaClassificationHead on the
  // first position, <s>, or on the mean: `pooling`; --num-classes) in place of its masked-LM
  // head: K classes, 0 none.
  int64_t classes = 0;
  ClassifierPooling pooling = ClassifierPooling::kCls;  // what the classification head reads
  SchemeSettings scheme;
  double rezero_alpha_init = 0.0; // ReZero's alpha at init (0 in the paper; tests set others)
  // The last N layers of the encoder's and of the decoder's stack have no norms, x + drop(f(x)),
  // whatever the scheme's placement: the layers DT-Fixup adds to a trained model (Xu et al. 2021;
  // BorealisAI/DT-Fixup transformer.py:155-164, use_lnorm=False; model/stacking.h). 0: none.
  int64_t norm_free_encoder_layers = 0;
  int64_t norm_free_decoder_layers = 0;
  Parametrisation parametrisation = Parametrisation::kSp;  // --parametrisation
  // --mup-base-width C0 (mup only, else 0): the width multiplier is m = C / C0; the base model has
  // d_model C0, ffn_dim F C0 / C and the same heads and depths (model/width.h's base_config).
  int64_t mup_base_width = 0;
  UmupAlphas umup;  // --umup-alpha-* (u-mup only, else all 1)

  // Every problem at once, one message each (empty when valid).
  std::vector<std::string> problems() const;
  // Whether the kind has an encoder (an encoder-decoder's decoder layers attend to its output).
  bool has_encoder() const { return kind != kDecoderOnly; }
  bool has_decoder() const { return kind != kEncoderOnly; }
  // One stack of layers (the built-in decoder-only and encoder-only kinds): the single-stack scheme
  // constants and running text. A kind registered elsewhere (a test's) is not.
  bool single_stack() const { return kind == kDecoderOnly || kind == kEncoderOnly; }
  // The layers of the one stack of a single-stack kind.
  int64_t stack_layers() const { return has_encoder() ? encoder_layers : decoder_layers; }
  // An encoder-only model with a classification head: its logits are (B,1,K) and its targets
  // (B,1) class ids, one per example (data::Layout::kClassify).
  bool classifier() const { return classes > 0; }
  // Throws std::invalid_argument joining problems() when there are any.
  void validate() const;
};

// The placement of layer `index` of the decoder's (decoder: true) or the encoder's stack of `c`:
// none in the stack's norm-free last layers (ModelConfig::norm_free_*), else layer_placement().
NormPlacement stack_layer_placement(const ModelConfig& c, bool decoder, int64_t index);

// The model's vocabulary for a SentencePiece vocabulary of `pieces` entries: the same, plus the
// <mask> token at its end for an encoder-only model (fairseq's RoBERTa adds it last).
int64_t model_vocab_size(const std::string& kind, int64_t pieces);
// An encoder-only model's <mask> id: the last of its vocabulary.
inline int64_t mask_token(const ModelConfig& c) { return c.src_vocab_size - 1; }
// The target id the loss leaves out: padding (kPad) for the token-predicting models; none for a
// classifier, whose targets are class ids 0..K-1 (class 1 is not padding): torch's ignore_index -100.
int64_t target_padding(const ModelConfig& c);

// The weight matrices' and token tables' entries of a model of `c` (norms and biases
// left out), in double so that absurd sizes do not overflow. ModelConfig::problems() refuses a
// model whose fp32 parameters exceed the machine's physical memory.
double parameter_estimate(const ModelConfig& c);

// Names as written on the command line and in JSON.
std::string to_string(NormPlacement v);
std::string to_string(NormKind v);
std::string to_string(ResidualForm v);
std::string to_string(InitMethod v);
std::string to_string(SharedEmbeddings v);
std::string to_string(EmbeddingInit v);
std::string to_string(PositionEmbedding v);
std::string to_string(Activation v);
std::string to_string(ClassifierPooling v);
std::string to_string(Parametrisation v);
// Parsers throw std::invalid_argument naming `option`, the value and the choices.
NormPlacement parse_norm_placement(const std::string& s, const std::string& option = "--norm");
NormKind parse_norm_kind(const std::string& s, const std::string& option = "--norm-kind");
ResidualForm parse_residual_form(const std::string& s, const std::string& option = "--residual");
InitMethod parse_init_method(const std::string& s, const std::string& option = "--init");
SharedEmbeddings parse_shared_embeddings(const std::string& s,
                                         const std::string& option = "--share");
EmbeddingInit parse_embedding_init(const std::string& s, const std::string& option = "--embed-init");
PositionEmbedding parse_position_embedding(const std::string& s, const std::string& option = "--positions");
Activation parse_activation(const std::string& s, const std::string& option = "--activation");
ClassifierPooling parse_classifier_pooling(const std::string& s,
                                           const std::string& option = "--classifier-pooling");
Parametrisation parse_parametrisation(const std::string& s, const std::string& option = "--parametrisation");
// The forms `--form` names: "fairseq" (the defaults), "gpt2" (learned positions, GELU-tanh, no
// embedding scale; a decoder-only model gets GPT-2's init where the scheme's own is xavier) and
// "bert" (learned positions, GELU, no embedding scale, a norm on the embedding, 2 segment types;
// BERT's init where the scheme's own is xavier).
// Throws naming the choices. Call after the kind and the scheme are set.
void apply_form(const std::string& name, ModelConfig& config);

// The papers' combinations: post-ln, pre-ln, t-fixup, admin, rezero, deepnorm, and those of
// REFERENCE §10: peri-ln, mix-ln, dyt, rmsnorm-pre, lns.
SchemeSettings scheme_by_name(const std::string& name);
std::vector<std::string> scheme_names();
// The papers' sizes: iwslt-small, base, big, deep-narrow. Sets C, F, H and layer counts.
void apply_preset(const std::string& name, ModelConfig& config);
std::vector<std::string> preset_names();

void to_json(nlohmann::json& j, const SchemeSettings& s);
void to_json(nlohmann::json& j, const ModelConfig& c);
// {name: scheme `name` with `overrides`, as JSON} for each name: what the commands that build
// several schemes (--schemes) record in their configuration.
nlohmann::json schemes_json(const std::vector<std::string>& names, const SchemeOverrides& overrides);
void from_json(const nlohmann::json& j, ModelConfig& c);

}  // namespace normlab::model
