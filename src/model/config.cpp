#include "model/config.h"

#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/problems.h"
#include "model/unit_scaling.h"
#include "core/tokens.h"

namespace normlab::model {
namespace {

template <class E, size_t N>
using Names = std::array<std::pair<E, const char*>, N>;

constexpr Names<NormPlacement, 5> kNormNames{{{NormPlacement::kPost, "post"},
                                               {NormPlacement::kPre, "pre"},
                                               {NormPlacement::kPeri, "peri"},
                                               {NormPlacement::kMix, "mix"},
                                               {NormPlacement::kNone, "none"}}};
constexpr Names<NormKind, 3> kNormKindNames{{{NormKind::kLayerNorm, "layernorm"},
                                            {NormKind::kRMSNorm, "rmsnorm"},
                                            {NormKind::kDyT, "dyt"}}};
constexpr Names<ResidualForm, 4> kResidualNames{{{ResidualForm::kPlain, "plain"},
                                                 {ResidualForm::kAdmin, "admin"},
                                                 {ResidualForm::kReZero, "rezero"},
                                                 {ResidualForm::kDeepNorm, "deepnorm"}}};
constexpr Names<InitMethod, 8> kInitNames{{{InitMethod::kXavier, "xavier"},
                                           {InitMethod::kTFixup, "t-fixup"},
                                           {InitMethod::kAdminProfile, "admin-profile"},
                                           {InitMethod::kAdminClosedForm, "admin-closed-form"},
                                           {InitMethod::kReZero, "rezero"},
                                           {InitMethod::kDeepNorm, "deepnorm"},
                                           {InitMethod::kGpt2, "gpt2"},
                                           {InitMethod::kBert, "bert"}}};
constexpr Names<SharedEmbeddings, 3> kShareNames{{{SharedEmbeddings::kAll, "all"},
                                                  {SharedEmbeddings::kDecoder, "decoder"},
                                                  {SharedEmbeddings::kNone, "none"}}};
constexpr Names<EmbeddingInit, 2> kEmbedInitNames{{{EmbeddingInit::kNormal, "normal"},
                                                   {EmbeddingInit::kXavier, "xavier"}}};
constexpr Names<PositionEmbedding, 2> kPositionNames{{{PositionEmbedding::kSinusoidal, "sinusoidal"},
                                                      {PositionEmbedding::kLearned, "learned"}}};
constexpr Names<Activation, 3> kActivationNames{{{Activation::kRelu, "relu"},
                                                 {Activation::kGelu, "gelu"},
                                                 {Activation::kGeluTanh, "gelu-tanh"}}};
constexpr Names<ClassifierPooling, 2> kPoolingNames{{{ClassifierPooling::kCls, "cls"},
                                                     {ClassifierPooling::kMean, "mean"}}};
constexpr Names<Parametrisation, 3> kParametrisationNames{{{Parametrisation::kSp, "sp"},
                                                           {Parametrisation::kMup, "mup"},
                                                           {Parametrisation::kUmup, "u-mup"}}};

template <class E, size_t N>
std::string name_of(const Names<E, N>& names, E value) {
  for (const auto& [v, name] : names)
    if (v == value) return name;
  throw std::logic_error("unnamed enum value");
}

template <class E, size_t N>
E parse(const Names<E, N>& names, const std::string& s, const std::string& option) {
  std::string choices;
  for (const auto& [v, name] : names) {
    if (s == name) return v;
    choices += (choices.empty() ? "" : "|") + std::string(name);
  }
  throw std::invalid_argument(option + ": unknown value '" + s + "', expected " + choices);
}

struct NamedScheme {
  const char* name;
  SchemeSettings settings;
};
// The papers' combinations (REFERENCE §1), then REFERENCE §10's.
const std::array<NamedScheme, 11> kSchemes{{
    {"post-ln", {NormPlacement::kPost, ResidualForm::kPlain, InitMethod::kXavier}},
    {"pre-ln", {NormPlacement::kPre, ResidualForm::kPlain, InitMethod::kXavier}},
    {"t-fixup", {NormPlacement::kNone, ResidualForm::kPlain, InitMethod::kTFixup}},
    {"admin", {NormPlacement::kPost, ResidualForm::kAdmin, InitMethod::kAdminProfile}},
    {"rezero", {NormPlacement::kNone, ResidualForm::kReZero, InitMethod::kReZero}},
    {"deepnorm", {NormPlacement::kPost, ResidualForm::kDeepNorm, InitMethod::kDeepNorm}},
    {"peri-ln", {NormPlacement::kPeri, ResidualForm::kPlain, InitMethod::kXavier}},
    {"mix-ln", {NormPlacement::kMix, ResidualForm::kPlain, InitMethod::kXavier}},
    {"dyt", {NormPlacement::kPre, ResidualForm::kPlain, InitMethod::kXavier, NormKind::kDyT}},
    {"rmsnorm-pre", {NormPlacement::kPre, ResidualForm::kPlain, InitMethod::kXavier, NormKind::kRMSNorm}},
    {"lns", {NormPlacement::kPre, ResidualForm::kPlain, InitMethod::kXavier, NormKind::kLayerNorm,
             kDefaultMixLnAlpha, /*ln_scaling=*/true}},
}};

struct Preset {
  const char* name;
  int64_t d_model, ffn_dim, heads, encoder_layers, decoder_layers;
};
// REFERENCE §2: small 512-1024-4, base 512-2048-8, big 1024-4096-16, deep-narrow 64-128-2.
const std::array<Preset, 4> kPresets{{
    {"iwslt-small", 512, 1024, 4, 6, 6},
    {"base", 512, 2048, 8, 6, 6},
    {"big", 1024, 4096, 16, 6, 6},
    {"deep-narrow", 64, 128, 2, 6, 6},
}};

// The initialisations that make sense for each residual form: an init that sets a scheme
// parameter (omega, alpha) needs that parameter to exist; xavier leaves omega = 1, alpha = 1.
std::vector<InitMethod> inits_for(ResidualForm r) {
  switch (r) {
    case ResidualForm::kPlain: return {InitMethod::kXavier, InitMethod::kTFixup, InitMethod::kGpt2, InitMethod::kBert};
    case ResidualForm::kAdmin:
      return {InitMethod::kAdminProfile, InitMethod::kAdminClosedForm, InitMethod::kXavier};
    case ResidualForm::kReZero: return {InitMethod::kReZero};
    case ResidualForm::kDeepNorm: return {InitMethod::kDeepNorm, InitMethod::kXavier};
  }
  return {};
}

bool init_allowed(ResidualForm r, InitMethod i) {
  for (auto allowed : inits_for(r))
    if (allowed == i) return true;
  return false;
}

std::string allowed_inits(ResidualForm r) {
  std::string s;
  for (auto i : inits_for(r)) s += (s.empty() ? "" : "|") + to_string(i);
  return s;
}

}  // namespace

std::string to_string(NormPlacement v) { return name_of(kNormNames, v); }
std::string to_string(NormKind v) { return name_of(kNormKindNames, v); }
std::string to_string(ResidualForm v) { return name_of(kResidualNames, v); }
std::string to_string(InitMethod v) { return name_of(kInitNames, v); }
std::string to_string(SharedEmbeddings v) { return name_of(kShareNames, v); }
std::string to_string(EmbeddingInit v) { return name_of(kEmbedInitNames, v); }
std::string to_string(PositionEmbedding v) { return name_of(kPositionNames, v); }
std::string to_string(Activation v) { return name_of(kActivationNames, v); }
std::string to_string(ClassifierPooling v) { return name_of(kPoolingNames, v); }
std::string to_string(Parametrisation v) { return name_of(kParametrisationNames, v); }

NormPlacement parse_norm_placement(const std::string& s, const std::string& option) {
  return parse(kNormNames, s, option);
}
NormKind parse_norm_kind(const std::string& s, const std::string& option) {
  return parse(kNormKindNames, s, option);
}
ResidualForm parse_residual_form(const std::string& s, const std::string& option) {
  return parse(kResidualNames, s, option);
}
InitMethod parse_init_method(const std::string& s, const std::string& option) {
  return parse(kInitNames, s, option);
}
SharedEmbeddings parse_shared_embeddings(const std::string& s, const std::string& option) {
  return parse(kShareNames, s, option);
}

EmbeddingInit parse_embedding_init(const std::string& s, const std::string& option) {
  return parse(kEmbedInitNames, s, option);
}
PositionEmbedding parse_position_embedding(const std::string& s, const std::string& option) {
  return parse(kPositionNames, s, option);
}
Activation parse_activation(const std::string& s, const std::string& option) {
  return parse(kActivationNames, s, option);
}
ClassifierPooling parse_classifier_pooling(const std::string& s, const std::string& option) {
  return parse(kPoolingNames, s, option);
}
Parametrisation parse_parametrisation(const std::string& s, const std::string& option) {
  return parse(kParametrisationNames, s, option);
}

void apply_form(const std::string& name, ModelConfig& c) {
  if (name == "fairseq") return;
  if (name != "gpt2" && name != "bert")
    throw std::invalid_argument("--form: unknown value '" + name + "', expected fairseq|gpt2|bert");
  c.positions = PositionEmbedding::kLearned;
  c.scale_embedding = false;
  if (name == "gpt2") {  // GPT-2 (Radford et al. 2019; Hugging Face GPT2Model): wpe, gelu_new, wte unscaled.
    c.activation = Activation::kGeluTanh;
    if (c.kind == kDecoderOnly && c.scheme.init == InitMethod::kXavier) c.scheme.init = InitMethod::kGpt2;
    return;
  }
  // BERT (Devlin et al. 2019; Hugging Face BertEmbeddings): LayerNorm(word + position + token type), gelu.
  c.activation = Activation::kGelu;
  c.embedding_norm = true;
  c.segment_types = 2;
  if (c.kind == kEncoderOnly && c.scheme.init == InitMethod::kXavier) c.scheme.init = InitMethod::kBert;
}

SchemeSettings SchemeOverrides::apply(SchemeSettings s) const {
  if (norm) s.norm = *norm;
  if (residual) s.residual = *residual;
  if (init) s.init = *init;
  if (norm_kind) s.norm_kind = *norm_kind;
  if (mix_alpha) s.mix_alpha = *mix_alpha;
  s.ln_scaling = s.ln_scaling || ln_scaling;
  s.qk_norm = s.qk_norm || qk_norm;
  return s;
}

NormPlacement layer_placement(const SchemeSettings& s, int64_t index, int64_t count) {
  if (s.norm != NormPlacement::kMix) return s.norm;
  // Li et al. 2024, Sec. 3: Post-LN for layers l < floor(alpha L), Pre-LN for the rest.
  const auto post_layers = static_cast<int64_t>(std::floor(s.mix_alpha * static_cast<double>(count)));
  return index < post_layers ? NormPlacement::kPost : NormPlacement::kPre;
}

NormPlacement stack_layer_placement(const ModelConfig& c, bool decoder, int64_t index) {
  const int64_t layers = decoder ? c.decoder_layers : c.encoder_layers;
  const int64_t free = decoder ? c.norm_free_decoder_layers : c.norm_free_encoder_layers;
  return index >= layers - free ? NormPlacement::kNone : layer_placement(c.scheme, index, layers);
}

double norm_output_scale(const SchemeSettings& s, int64_t index) {
  return s.ln_scaling ? 1.0 / std::sqrt(static_cast<double>(index + 1)) : 1.0;
}

bool has_final_norm(const SchemeSettings& s) {
  return s.norm == NormPlacement::kPre || s.norm == NormPlacement::kPeri ||
         s.norm == NormPlacement::kMix;
}

SchemeSettings scheme_by_name(const std::string& name) {
  std::string choices;
  for (const auto& s : kSchemes) {
    if (name == s.name) return s.settings;
    choices += (choices.empty() ? "" : "|") + std::string(s.name);
  }
  throw std::invalid_argument("--scheme: unknown scheme '" + name + "', expected " + choices);
}

std::vector<std::string> scheme_names() {
  std::vector<std::string> names;
  for (const auto& s : kSchemes) names.emplace_back(s.name);
  return names;
}

void apply_preset(const std::string& name, ModelConfig& c) {
  std::string choices;
  for (const auto& p : kPresets) {
    if (name == p.name) {
      c.d_model = p.d_model;
      c.ffn_dim = p.ffn_dim;
      c.heads = p.heads;
      c.encoder_layers = p.encoder_layers;
      c.decoder_layers = p.decoder_layers;
      return;
    }
    choices += (choices.empty() ? "" : "|") + std::string(p.name);
  }
  throw std::invalid_argument("--preset: unknown preset '" + name + "', expected " + choices);
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& p : kPresets) names.emplace_back(p.name);
  return names;
}

std::vector<std::string> scheme_problems(const SchemeSettings& scheme) {
  std::vector<std::string> out;
  // docs/schemes.md says why each is rejected.
  const auto& [norm, residual, init, kind, mix_alpha, ln_scaling, qk_norm] = scheme;
  const std::string combo = "--norm " + to_string(norm) + " --residual " + to_string(residual) +
                            " --init " + to_string(init) + ": ";
  if (kind != NormKind::kLayerNorm && norm == NormPlacement::kNone && !qk_norm)
    out.push_back("--norm-kind " + to_string(kind) +
                  " with --norm none: there is no norm to make one (choose a placement or --qk-norm)");
  if (norm == NormPlacement::kMix && !(mix_alpha >= 0.0 && mix_alpha <= 1.0))
    out.push_back("--mix-ln-alpha must be in [0, 1], got " + std::to_string(mix_alpha));
  if (norm != NormPlacement::kMix && mix_alpha != kDefaultMixLnAlpha)
    out.push_back("--mix-ln-alpha applies to --norm mix only (got --norm " + to_string(norm) + ")");
  if (ln_scaling && norm != NormPlacement::kPre)
    out.push_back("--ln-scaling scales Pre-LN's norms (Sun et al. 2025); it needs --norm pre, got --norm " +
                  to_string(norm));
  if ((residual == ResidualForm::kAdmin || residual == ResidualForm::kDeepNorm) &&
      norm != NormPlacement::kPost)
    out.push_back(combo + to_string(residual) +
                  " rescales the residual before a Post-LN LayerNorm; it needs --norm post");
  if (residual == ResidualForm::kReZero && norm != NormPlacement::kNone)
    out.push_back(combo + "rezero replaces LayerNorm; it needs --norm none");
  if (init == InitMethod::kTFixup &&
      (norm != NormPlacement::kNone || residual != ResidualForm::kPlain))
    out.push_back(combo +
                  "t-fixup initialises a network without LayerNorm; it needs --norm none "
                  "--residual plain");
  if (!init_allowed(residual, init))
    out.push_back(combo + "--residual " + to_string(residual) + " takes --init " +
                  allowed_inits(residual));
  return out;
}

namespace {

double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

}  // namespace

int64_t model_vocab_size(const std::string& kind, int64_t pieces) { return kind == kEncoderOnly ? pieces + 1 : pieces; }

double parameter_estimate(const ModelConfig& c) {
  const double C = static_cast<double>(c.d_model), F = static_cast<double>(c.ffn_dim);
  const double embeddings =
      C * static_cast<double>((c.has_encoder() ? c.src_vocab_size : 0) + (c.has_decoder() ? c.tgt_vocab_size : 0));
  const double encoder_layer = 4 * C * C + 2 * C * F;
  const double decoder_layer = (c.single_stack() ? 4 : 8) * C * C + 2 * C * F;
  return embeddings + static_cast<double>(c.encoder_layers) * encoder_layer +
         static_cast<double>(c.decoder_layers) * decoder_layer;
}

namespace {

// What the model kinds and their forms need of the rest: inits of one kind, BERT's segment
// table, one vocabulary, a classifier's head.
std::vector<std::string> kind_problems(const ModelConfig& c) {
  std::vector<std::string> out;
  if (c.scheme.init == InitMethod::kGpt2 && c.kind != kDecoderOnly)
    out.push_back("--init gpt2 is GPT-2's initialisation of a single stack: it needs --model-kind decoder-only");
  if (c.scheme.init == InitMethod::kBert && c.kind != kEncoderOnly)
    out.push_back("--init bert is BERT's initialisation of an encoder: it needs --model-kind encoder-only");
  if (c.segment_types < 0 || c.segment_types > 2)
    out.push_back("segment types must be 0 or up to 2 (BERT's sentence A and B), got " +
                  std::to_string(c.segment_types));
  if (c.classes < 0 || c.classes == 1)
    out.push_back("--num-classes must be 0 (no classifier) or at least 2, got " + std::to_string(c.classes));
  if (c.classes != 0 && c.kind != kEncoderOnly)
    out.push_back("--num-classes: a classification head sits on an encoder-only model, not " + c.kind);
  if (c.pooling != ClassifierPooling::kCls && c.classes == 0)
    out.push_back("--classifier-pooling " + to_string(c.pooling) + " is a classifier's: give --num-classes K");
  if (c.kind == kEncoderOnly && c.src_vocab_size != c.tgt_vocab_size)
    out.push_back("an " + c.kind + " model has one vocabulary, but source has " + std::to_string(c.src_vocab_size) +
                  " and target " + std::to_string(c.tgt_vocab_size) + " entries");
  if (c.single_stack() && c.share == SharedEmbeddings::kAll)
    out.push_back("--share all: " + std::string(c.kind == kEncoderOnly ? "an " : "a ") + c.kind +
                  " model has one token table; --share decoder ties it to the output projection, --share none " +
                  "does not");
  if (c.share == SharedEmbeddings::kAll && c.src_vocab_size != c.tgt_vocab_size)
    out.push_back("--share all needs one joint vocabulary, but source has " +
                  std::to_string(c.src_vocab_size) + " and target " +
                  std::to_string(c.tgt_vocab_size) + " entries");
  return out;
}

// The norm-free last layers (stacking.h's DT-Fixup layers): within their stack, plain residual.
std::vector<std::string> norm_free_problems(const ModelConfig& c) {
  std::vector<std::string> out;
  for (auto [free, layers, stack] : {std::tuple{c.norm_free_encoder_layers, c.encoder_layers, "encoder"},
                                     std::tuple{c.norm_free_decoder_layers, c.decoder_layers, "decoder"}})
    if (free < 0 || free > layers)
      out.push_back("norm_free_" + std::string(stack) + "_layers must be in 0.." + std::to_string(layers) +
                    " (the " + stack + "'s layers), got " + std::to_string(free));
  if (c.norm_free_encoder_layers + c.norm_free_decoder_layers > 0 && c.scheme.residual != ResidualForm::kPlain)
    out.push_back("layers without norms need the plain residual, not " + to_string(c.scheme.residual));
  return out;
}

// --parametrisation mup's base model (model/width.h's base_config): C0 > 0 whose heads, FFN
// dimension F C0 / C and sinusoidal table are whole, as the model's are.
std::vector<std::string> width_problems(const ModelConfig& c) {
  std::vector<std::string> out;
  const int64_t base = c.mup_base_width;
  if (c.parametrisation != Parametrisation::kMup) {
    if (base != 0) out.push_back("--mup-base-width applies to --parametrisation mup only");
    return out;
  }
  if (base <= 0) {
    out.push_back("--parametrisation mup needs --mup-base-width C0 > 0 (the width at which mup is sp), got " +
                  std::to_string(base));
    return out;
  }
  const std::string given = "--mup-base-width " + std::to_string(base);
  if (c.heads > 0 && base % c.heads != 0)
    out.push_back(given + " is not divisible by --heads " + std::to_string(c.heads) + " (the base model's heads)");
  if (c.d_model > 0 && (c.ffn_dim * base) % c.d_model != 0)
    out.push_back(given + ": the base model's FFN dimension --ffn-dim x C0 / --d-model = " + std::to_string(c.ffn_dim) +
                  " x " + std::to_string(base) + " / " + std::to_string(c.d_model) + " is not whole");
  if (c.positions == PositionEmbedding::kSinusoidal && base % 2 != 0)
    out.push_back(given + " must be even (the base model's sinusoidal positions use C0/2 frequencies)");
  return out;
}

}  // namespace

std::vector<std::string> ModelConfig::problems() const {
  std::vector<std::string> out;
  auto positive = [&](int64_t v, const char* option) {
    if (v <= 0) out.push_back(std::string(option) + " must be positive, got " + std::to_string(v));
  };
  positive(d_model, "--d-model");
  positive(ffn_dim, "--ffn-dim");
  positive(heads, "--heads");
  if (!has_encoder() && encoder_layers != 0)
    out.push_back("--encoder-layers: a " + kind + " model has no encoder, got " + std::to_string(encoder_layers) +
                  " (its layers are --decoder-layers or --layers)");
  else if (!has_decoder() && decoder_layers != 0)
    out.push_back("--decoder-layers: an " + kind + " model has no decoder, got " + std::to_string(decoder_layers) +
                  " (its layers are --encoder-layers or --layers)");
  if (has_encoder()) positive(encoder_layers, single_stack() ? "--encoder-layers (or --layers)" : "--encoder-layers");
  if (has_decoder()) positive(decoder_layers, single_stack() ? "--decoder-layers (or --layers)" : "--decoder-layers");
  positive(max_positions, "--max-positions");
  if (d_model > 0 && heads > 0 && d_model % heads != 0)
    out.push_back("--d-model " + std::to_string(d_model) + " is not divisible by --heads " +
                  std::to_string(heads));
  if (positions == PositionEmbedding::kSinusoidal && d_model > 0 && d_model % 2 != 0)
    out.push_back("--d-model must be even (sinusoidal positions use d/2 frequencies), got " +
                  std::to_string(d_model));
  for (auto [v, option] : {std::pair{src_vocab_size, "source vocabulary size"},
                           std::pair{tgt_vocab_size, "target vocabulary size"}}) {
    if (v <= kNumSpecialTokens)
      out.push_back(std::string(option) + " must exceed the " +
                    std::to_string(kNumSpecialTokens) + " special tokens, got " +
                    std::to_string(v));
  }
  for (auto [v, option] : {std::pair{dropout, "--dropout"},
                           std::pair{attention_dropout, "--attention-dropout"},
                           std::pair{activation_dropout, "--activation-dropout"}}) {
    if (!(v >= 0.0 && v < 1.0))
      out.push_back(std::string(option) + " must be in [0, 1), got " + std::to_string(v));
  }
  if (out.empty()) {  // the sizes are sane: do the parameters fit in this machine's memory?
    const double bytes = 4.0 * parameter_estimate(*this), memory = physical_memory_bytes();
    if (memory > 0 && bytes > memory)
      out.push_back("the model's parameters (--d-model " + std::to_string(d_model) + ", --ffn-dim " +
                    std::to_string(ffn_dim) + ", " + std::to_string(encoder_layers) + " + " +
                    std::to_string(decoder_layers) + " layers, vocabularies " + std::to_string(src_vocab_size) +
                    " and " + std::to_string(tgt_vocab_size) + ") need " + gib(bytes) +
                    " GiB in fp32, more than this machine's " + gib(memory) + " GiB of memory");
  }
  for (auto& p : kind_problems(*this)) out.push_back(std::move(p));
  for (auto& p : norm_free_problems(*this)) out.push_back(std::move(p));
  for (auto& p : scheme_problems(scheme)) out.push_back(std::move(p));
  for (auto& p : width_problems(*this)) out.push_back(std::move(p));
  for (auto& p : unit_scaling_problems(*this)) out.push_back(std::move(p));
  return out;
}

void ModelConfig::validate() const {
  core::throw_if_problems(problems());
}

void to_json(nlohmann::json& j, const SchemeSettings& s) {
  j = {{"norm", to_string(s.norm)},
       {"residual", to_string(s.residual)},
       {"init", to_string(s.init)},
       {"norm_kind", to_string(s.norm_kind)},
       {"mix_ln_alpha", s.mix_alpha},
       {"ln_scaling", s.ln_scaling},
       {"qk_norm", s.qk_norm}};
}

nlohmann::json schemes_json(const std::vector<std::string>& names, const SchemeOverrides& overrides) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& name : names) j[name] = overrides.apply(scheme_by_name(name));
  return j;
}

void to_json(nlohmann::json& j, const ModelConfig& c) {
  j = {{"d_model", c.d_model},
       {"ffn_dim", c.ffn_dim},
       {"heads", c.heads},
       {"encoder_layers", c.encoder_layers},
       {"decoder_layers", c.decoder_layers},
       {"src_vocab_size", c.src_vocab_size},
       {"tgt_vocab_size", c.tgt_vocab_size},
       {"max_positions", c.max_positions},
       {"dropout", c.dropout},
       {"attention_dropout", c.attention_dropout},
       {"activation_dropout", c.activation_dropout},
       {"share_embeddings", to_string(c.share)},
       {"embed_init", to_string(c.embed_init)},
       {"rezero_alpha_init", c.rezero_alpha_init}};
  j.update(nlohmann::json(c.scheme));  // norm, residual, init, norm_kind, ...
  // Written for the kinds after the first only: an encoder-decoder's files stay as every
  // earlier normlab wrote and reads them.
  if (c.kind != kEncoderDecoder) j["kind"] = c.kind;
  // The same for the form: files of fairseq's form stay as before the option existed.
  if (c.positions != PositionEmbedding::kSinusoidal) j["positions"] = to_string(c.positions);
  if (c.activation != Activation::kRelu) j["activation"] = to_string(c.activation);
  if (!c.scale_embedding) j["scale_embedding"] = false;
  if (c.embedding_norm) j["embedding_norm"] = true;
  if (c.segment_types != 0) j["segment_types"] = c.segment_types;
  if (c.classes != 0) j["classes"] = c.classes;
  if (c.pooling != ClassifierPooling::kCls) j["classifier_pooling"] = to_string(c.pooling);
  if (c.norm_free_encoder_layers != 0) j["norm_free_encoder_layers"] = c.norm_free_encoder_layers;
  if (c.norm_free_decoder_layers != 0) j["norm_free_decoder_layers"] = c.norm_free_decoder_layers;
  // And for the parametrisation: sp files stay byte for byte as before the option existed.
  if (c.parametrisation != Parametrisation::kSp) {
    j["parametrisation"] = to_string(c.parametrisation);
    j["mup_base_width"] = c.mup_base_width;
  }
  if (!c.umup.defaults())
    for (const auto& f : umup_alpha_fields()) j["umup_alphas"][f.key] = c.umup.*f.member;
}

void from_json(const nlohmann::json& j, ModelConfig& c) {
  c.kind = j.value("kind", std::string(kEncoderDecoder));
  j.at("d_model").get_to(c.d_model);
  j.at("ffn_dim").get_to(c.ffn_dim);
  j.at("heads").get_to(c.heads);
  j.at("encoder_layers").get_to(c.encoder_layers);
  j.at("decoder_layers").get_to(c.decoder_layers);
  j.at("src_vocab_size").get_to(c.src_vocab_size);
  j.at("tgt_vocab_size").get_to(c.tgt_vocab_size);
  j.at("max_positions").get_to(c.max_positions);
  j.at("dropout").get_to(c.dropout);
  j.at("attention_dropout").get_to(c.attention_dropout);
  j.at("activation_dropout").get_to(c.activation_dropout);
  c.share = parse_shared_embeddings(j.at("share_embeddings").get<std::string>(), "share_embeddings");
  // Absent from files written before the option existed: they were all "normal".
  c.embed_init = parse_embedding_init(j.value("embed_init", std::string("normal")), "embed_init");
  c.scheme.norm = parse_norm_placement(j.at("norm").get<std::string>(), "norm");
  c.scheme.residual = parse_residual_form(j.at("residual").get<std::string>(), "residual");
  c.scheme.init = parse_init_method(j.at("init").get<std::string>(), "init");
  // Absent from files written before REFERENCE §10's schemes: LayerNorm, no scaling, no QK-norm.
  c.scheme.norm_kind = parse_norm_kind(j.value("norm_kind", std::string("layernorm")), "norm_kind");
  c.scheme.mix_alpha = j.value("mix_ln_alpha", kDefaultMixLnAlpha);
  c.scheme.ln_scaling = j.value("ln_scaling", false);
  c.scheme.qk_norm = j.value("qk_norm", false);
  j.at("rezero_alpha_init").get_to(c.rezero_alpha_init);
  c.positions = parse_position_embedding(j.value("positions", std::string("sinusoidal")), "positions");
  c.activation = parse_activation(j.value("activation", std::string("relu")), "activation");
  c.scale_embedding = j.value("scale_embedding", true);
  c.embedding_norm = j.value("embedding_norm", false);
  c.segment_types = j.value("segment_types", int64_t{0});
  c.classes = j.value("classes", int64_t{0});
  c.pooling = parse_classifier_pooling(j.value("classifier_pooling", std::string("cls")), "classifier_pooling");
  c.norm_free_encoder_layers = j.value("norm_free_encoder_layers", int64_t{0});
  c.norm_free_decoder_layers = j.value("norm_free_decoder_layers", int64_t{0});
  c.parametrisation = parse_parametrisation(j.value("parametrisation", std::string("sp")), "parametrisation");
  c.mup_base_width = j.value("mup_base_width", int64_t{0});
  const auto alphas = j.value("umup_alphas", nlohmann::json::object());  // absent: all 1
  for (const auto& f : umup_alpha_fields()) c.umup.*f.member = alphas.value(f.key, 1.0);
}

int64_t target_padding(const ModelConfig& c) { return c.classifier() ? -100 : kPad; }

}  // namespace normlab::model
