#include "model/hf_export.h"

#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/file_io.h"
#include "core/problems.h"
#include "core/tokens.h"
#include "model/checkpoint.h"
#include "model/layers.h"
#include "model/norm.h"

namespace normlab::model {
namespace {

using Named = std::vector<std::pair<std::string, torch::Tensor>>;

const char* hf_activation(Activation a) {
  switch (a) {
    case Activation::kRelu: return "relu";
    case Activation::kGelu: return "gelu";
    case Activation::kGeluTanh: return "gelu_new";  // transformers' NewGELUActivation: the tanh form
  }
  return "";
}

// GPT-2's Conv1D keeps (in, out): a Linear's (out, in) weight transposed.
torch::Tensor conv1d(const torch::Tensor& linear_weight) { return linear_weight.t(); }

// Parameter names of transformers' GPT2LMHeadModel (modeling_gpt2.py), from normlab's.
Named gpt2_tensors(const Model& model) {
  const auto& c = model->config();
  const auto p = named_parameters(model);
  const auto at = [&](const std::string& name) { return p.at(name); };
  Named out;
  out.emplace_back("transformer.wte.weight", at("decoder.embed_tokens.weight"));
  out.emplace_back("transformer.wpe.weight", c.positions == PositionEmbedding::kLearned
                                                 ? at("decoder.embed_positions.weight")
                                                 : sinusoidal_table(c.d_model, c.max_positions + kPositionOffset)
                                                       .slice(0, kPositionOffset));
  for (int64_t i = 0; i < c.decoder_layers; ++i) {
    const std::string ours = "decoder.layers." + std::to_string(i) + ".", theirs = "transformer.h." + std::to_string(i) + ".";
    const auto attn = [&](const std::string& part) { return at(ours + "self_attn." + part); };
    out.emplace_back(theirs + "ln_1.weight", at(ours + "self_attn_layer_norm.weight"));
    out.emplace_back(theirs + "ln_1.bias", at(ours + "self_attn_layer_norm.bias"));
    out.emplace_back(theirs + "attn.c_attn.weight",
                     conv1d(torch::cat({attn("q_proj.weight"), attn("k_proj.weight"), attn("v_proj.weight")}, 0)));
    out.emplace_back(theirs + "attn.c_attn.bias",
                     torch::cat({attn("q_proj.bias"), attn("k_proj.bias"), attn("v_proj.bias")}, 0));
    out.emplace_back(theirs + "attn.c_proj.weight", conv1d(attn("out_proj.weight")));
    out.emplace_back(theirs + "attn.c_proj.bias", attn("out_proj.bias"));
    out.emplace_back(theirs + "ln_2.weight", at(ours + "final_layer_norm.weight"));
    out.emplace_back(theirs + "ln_2.bias", at(ours + "final_layer_norm.bias"));
    out.emplace_back(theirs + "mlp.c_fc.weight", conv1d(at(ours + "fc1.weight")));
    out.emplace_back(theirs + "mlp.c_fc.bias", at(ours + "fc1.bias"));
    out.emplace_back(theirs + "mlp.c_proj.weight", conv1d(at(ours + "fc2.weight")));
    out.emplace_back(theirs + "mlp.c_proj.bias", at(ours + "fc2.bias"));
  }
  out.emplace_back("transformer.ln_f.weight", at("decoder.layer_norm.weight"));
  out.emplace_back("transformer.ln_f.bias", at("decoder.layer_norm.bias"));
  // Tied (--share decoder): transformers ties lm_head to wte itself and stores wte alone.
  if (c.share == SharedEmbeddings::kNone) out.emplace_back("lm_head.weight", at("decoder.output_projection.weight"));
  return out;
}

// Parameter names of transformers' BertForMaskedLM (modeling_bert.py), from normlab's encoder-only
// model in BERT's form.
Named bert_tensors(const Model& model) {
  const auto& c = model->config();
  const auto p = named_parameters(model);
  const auto at = [&](const std::string& name) { return p.at(name); };
  Named out;
  const auto pair = [&](const std::string& theirs, const std::string& ours) {
    out.emplace_back(theirs + ".weight", at(ours + ".weight"));
    out.emplace_back(theirs + ".bias", at(ours + ".bias"));
  };
  out.emplace_back("bert.embeddings.word_embeddings.weight", at("encoder.embed_tokens.weight"));
  out.emplace_back("bert.embeddings.position_embeddings.weight", at("encoder.embed_positions.weight"));
  out.emplace_back("bert.embeddings.token_type_embeddings.weight", at("encoder.segment_embeddings.weight"));
  pair("bert.embeddings.LayerNorm", "encoder.layernorm_embedding");
  for (int64_t i = 0; i < c.encoder_layers; ++i) {
    const std::string ours = "encoder.layers." + std::to_string(i) + ".",
                      theirs = "bert.encoder.layer." + std::to_string(i) + ".";
    pair(theirs + "attention.self.query", ours + "self_attn.q_proj");
    pair(theirs + "attention.self.key", ours + "self_attn.k_proj");
    pair(theirs + "attention.self.value", ours + "self_attn.v_proj");
    pair(theirs + "attention.output.dense", ours + "self_attn.out_proj");
    pair(theirs + "attention.output.LayerNorm", ours + "self_attn_layer_norm");
    pair(theirs + "intermediate.dense", ours + "fc1");
    pair(theirs + "output.dense", ours + "fc2");
    pair(theirs + "output.LayerNorm", ours + "final_layer_norm");
  }
  if (c.classifier()) {  // BertForSequenceClassification: the same function in evaluation mode
    pair("bert.pooler.dense", "classification_head.dense");
    pair("classifier", "classification_head.out_proj");
    return out;
  }
  pair("cls.predictions.transform.dense", "lm_head.dense");
  pair("cls.predictions.transform.LayerNorm", "lm_head.layer_norm");
  out.emplace_back("cls.predictions.bias", at("lm_head.bias"));
  out.emplace_back("cls.predictions.decoder.bias", at("lm_head.bias"));  // transformers ties the two
  // Tied (--share decoder): transformers ties the decoder to word_embeddings and stores that alone.
  if (c.share == SharedEmbeddings::kNone) out.emplace_back("cls.predictions.decoder.weight", at("lm_head.weight"));
  return out;
}

nlohmann::json bert_lm_config(const ModelConfig& c) {
  return {{"architectures", {"BertForMaskedLM"}},
          {"model_type", "bert"},
          {"vocab_size", c.src_vocab_size},
          {"hidden_size", c.d_model},
          {"num_hidden_layers", c.encoder_layers},
          {"num_attention_heads", c.heads},
          {"intermediate_size", c.ffn_dim},
          {"hidden_act", hf_activation(c.activation)},
          {"hidden_dropout_prob", c.dropout},
          {"attention_probs_dropout_prob", c.attention_dropout},
          {"max_position_embeddings", c.max_positions},
          {"type_vocab_size", c.segment_types},
          {"layer_norm_eps", kNormEps},
          {"initializer_range", 0.02},
          {"tie_word_embeddings", c.share != SharedEmbeddings::kNone},
          {"pad_token_id", kPad},
          {"torch_dtype", "float32"}};
}

nlohmann::json bert_config(const ModelConfig& c) {
  auto j = bert_lm_config(c);
  if (c.classifier()) {
    j["architectures"] = {"BertForSequenceClassification"};
    j["num_labels"] = c.classes;
    j["problem_type"] = "single_label_classification";
  }
  return j;
}

nlohmann::json gpt2_config(const ModelConfig& c) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", c.tgt_vocab_size},
          {"n_positions", c.max_positions},
          {"n_embd", c.d_model},
          {"n_layer", c.decoder_layers},
          {"n_head", c.heads},
          {"n_inner", c.ffn_dim},
          {"activation_function", hf_activation(c.activation)},
          {"resid_pdrop", c.dropout},
          {"embd_pdrop", c.dropout},
          {"attn_pdrop", c.attention_dropout},
          {"layer_norm_epsilon", kNormEps},
          {"initializer_range", 0.02},
          {"scale_attn_weights", true},
          {"tie_word_embeddings", c.share != SharedEmbeddings::kNone},
          {"bos_token_id", kEos},  // every context starts with </s> (docs/generate.md)
          {"eos_token_id", kEos},
          {"pad_token_id", kPad},
          {"torch_dtype", "float32"}};
}

// The safetensors format (huggingface/safetensors): an 8-byte little-endian header length, the
// JSON header {name: {dtype, shape, data_offsets}}, padded with spaces to a multiple of 8, then
// the tensors' bytes, row-major, in header order.
void write_safetensors(const std::string& path, const Named& tensors) {
  nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};
  std::vector<torch::Tensor> data;
  int64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    auto f = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    header[name] = {{"dtype", "F32"}, {"shape", f.sizes().vec()}, {"data_offsets", {offset, offset + f.nbytes()}}};
    offset += static_cast<int64_t>(f.nbytes());
    data.push_back(std::move(f));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  core::write_file_atomic(path, [&](const core::ByteSink& sink) {
    uint64_t n = text.size();
    char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    sink(length, 8);
    sink(text.data(), text.size());
    for (const auto& f : data) sink(static_cast<const char*>(f.data_ptr()), f.nbytes());
  });
}

// What GPT-2 and BERT share: a plain residual, LayerNorm, no QK-norm or LayerNorm scaling, tokens
// unscaled; `placement` theirs (GPT-2 pre, BERT post).
std::vector<std::string> hf_common_problems(const ModelConfig& c, NormPlacement placement, const std::string& arch,
                                            const std::string& form) {
  std::vector<std::string> p;
  const auto& s = c.scheme;
  if (s.norm != placement)
    p.push_back("norm placement " + to_string(s.norm) + " (" + arch + " is " + to_string(placement) + ")");
  if (s.norm_kind != NormKind::kLayerNorm) p.push_back("norm kind " + to_string(s.norm_kind) + " (" + arch + "'s is layernorm)");
  if (s.residual != ResidualForm::kPlain) p.push_back("residual " + to_string(s.residual) + " (" + arch + "'s is plain)");
  if (s.qk_norm) p.push_back("QK-norm (" + arch + " has none)");
  if (s.ln_scaling) p.push_back("LayerNorm scaling (" + arch + " has none)");
  if (c.norm_free_encoder_layers + c.norm_free_decoder_layers > 0)
    p.push_back("layers without norms (DT-Fixup's; " + arch + "'s layers all have them)");
  if (c.scale_embedding)
    p.push_back("token embeddings scaled by sqrt(C) (" + arch + " does not; --form " + form + " or --no-scale-embedding)");
  if (c.parametrisation != Parametrisation::kSp)
    p.push_back("--parametrisation " + to_string(c.parametrisation) + " (" + arch +
                " has no readout multiplier and scales attention by 1/sqrt(D))");
  return p;
}

}  // namespace

std::vector<std::string> hf_gpt2_problems(const ModelConfig& c) {
  auto p = hf_common_problems(c, NormPlacement::kPre, "GPT-2", "gpt2");
  if (c.kind != kDecoderOnly) p.insert(p.begin(), "an " + c.kind + " model (GPT-2 is decoder-only)");
  return p;
}

std::vector<std::string> hf_bert_problems(const ModelConfig& c) {
  auto p = hf_common_problems(c, NormPlacement::kPost, "BERT", "bert");
  if (c.kind != kEncoderOnly) p.insert(p.begin(), "an " + c.kind + " model (BERT is encoder-only)");
  if (c.positions != PositionEmbedding::kLearned) p.push_back("sinusoidal positions (BERT learns them; --form bert)");
  if (c.segment_types == 0) p.push_back("no segment table (BERT has token types; --form bert)");
  if (!c.embedding_norm) p.push_back("no norm on the embedding (BERT's embeddings.LayerNorm; --form bert)");
  if (c.pooling != ClassifierPooling::kCls)
    p.push_back("--classifier-pooling " + to_string(c.pooling) + " (BertForSequenceClassification reads [CLS])");
  return p;
}

void export_hf(const Model& model, const std::string& dir) {
  const auto& c = model->config();
  const bool bert = c.kind == kEncoderOnly;
  const auto problems = bert ? hf_bert_problems(c) : hf_gpt2_problems(c);
  const std::string arch = bert ? "BERT" : "GPT-2";
  if (!problems.empty()) {
    std::string joined;
    for (const auto& q : problems) joined += (joined.empty() ? "" : "; ") + q;
    throw std::invalid_argument("--format hf writes transformers' " + arch + ", which cannot hold this model: " + joined);
  }
  std::filesystem::create_directories(dir);
  write_safetensors(dir + "/model.safetensors", bert ? bert_tensors(model) : gpt2_tensors(model));
  core::write_file_atomic(dir + "/config.json", (bert ? bert_config(c) : gpt2_config(c)).dump(2) + "\n");
}

}  // namespace normlab::model
