#include "model/layers.h"

#include <cmath>
#include <limits>
#include <optional>

#include <torch/torch.h>

#include "model/dropout.h"
#include "model/kernels/gelu_tanh.h"
#include "model/linear.h"

#include "core/tokens.h"
#include "model/scheme_constants.h"
#include "model/unit_scaling.h"
#include "model/width.h"

namespace normlab::model {
namespace {

torch::Tensor register_rezero_alpha(torch::nn::Module& layer, const ModelConfig& config) {
  if (config.scheme.residual != ResidualForm::kReZero) return {};
  return layer.register_parameter("rezero_alpha", torch::zeros({1}));  // set by initialize()
}

Norm final_layer_norm(torch::nn::Module& stack, const ModelConfig& config) {
  if (!has_final_norm(config.scheme)) return nullptr;
  return stack.register_module("layer_norm", Norm(config.scheme.norm_kind, config.d_model));
}

torch::Tensor scaled(torch::Tensor x, double scale) { return scale == 1.0 ? x : x * scale; }

// fc2(dropout(act(fc1(x)))); ReLU in the product's epilogue (model/linear.h). u-muP's scales
// (unit_scaling.h) are never 1 with ReLU: unit_scaling_problems refuses it.
torch::Tensor feed_forward(torch::nn::Linear& fc1, torch::nn::Linear& fc2, const torch::Tensor& x,
                           const FeedForwardSettings& s, bool training) {
  auto h = s.activation == Activation::kRelu
               ? linear_relu(fc1, x)
               : scaled(activate(scaled(linear(fc1, x), s.fc1_scale), s.activation), s.activation_scale);
  return scaled(linear(fc2, model::dropout(h, s.dropout, training)), s.fc2_scale);
}


// QK-norm's kind when the scheme has it on.
std::optional<NormKind> query_key_norm(const ModelConfig& c) {
  if (!c.scheme.qk_norm) return std::nullopt;
  return c.scheme.norm_kind;
}

MultiheadAttention attention(const ModelConfig& c) {
  return MultiheadAttention(c.d_model, c.heads, attention_scale(c), c.attention_dropout, query_key_norm(c),
                            unit_scaled(c) ? std::optional<double>(c.umup.attn_softmax) : std::nullopt);
}

// The context of layer `index` of the encoder's or the decoder's stack.
BlockContext layer_context(const ModelConfig& c, bool decoder, int64_t index,
                           std::shared_ptr<AdminProfile> profile) {
  BlockContext context;
  context.placement = stack_layer_placement(c, decoder, index);
  context.layer = index;
  context.stack_layers = decoder ? c.decoder_layers : c.encoder_layers;
  context.deepnorm_alpha = stack_constants(c, decoder).deepnorm_alpha;
  context.profile = std::move(profile);
  return context;
}

}  // namespace

FeedForwardSettings::FeedForwardSettings(const ModelConfig& c)
    : activation(c.activation), dropout(c.activation_dropout) {
  if (!unit_scaled(c)) return;
  // U.gelu(mult): gelu(mult z) / mult x its output scale, mult folded into z's scale.
  const double mult = c.umup.ffn_act;
  fc1_scale = mult * unit_linear_scale(c.d_model);
  activation_scale = unit_gelu_scale(mult) / mult;
  fc2_scale = unit_linear_scale(c.ffn_dim);
}

EncoderLayerImpl::EncoderLayerImpl(const ModelConfig& c, BlockContext context) : ffn_(c) {
  self_attn = register_module("self_attn", attention(c));
  rezero_alpha = context.rezero_alpha = register_rezero_alpha(*this, c);
  self_attn_block = ResidualBlock(*this, "self_attn", c, context);
  fc1 = register_module("fc1", torch::nn::Linear(c.d_model, c.ffn_dim));
  fc2 = register_module("fc2", torch::nn::Linear(c.ffn_dim, c.d_model));
  ffn_block = ResidualBlock(*this, "ffn", c, context);
}

torch::Tensor EncoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& padding_mask) {
  const bool train = is_training();
  auto h = self_attn_block.forward(
      x, [&](const torch::Tensor& t) { return self_attn(t, t, padding_mask, false); }, train);
  return ffn_block.forward(
      h, [&](const torch::Tensor& t) { return feed_forward(fc1, fc2, t, ffn_, train); },
      train);
}

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& c, BlockContext context) : ffn_(c) {
  self_attn = register_module("self_attn", attention(c));
  rezero_alpha = context.rezero_alpha = register_rezero_alpha(*this, c);
  self_attn_block = ResidualBlock(*this, "self_attn", c, context);
  if (!c.single_stack()) {  // fairseq's no_encoder_attn otherwise (transformer_lm)
    encoder_attn = register_module("encoder_attn", attention(c));
    encoder_attn_block = ResidualBlock(*this, "encoder_attn", c, context);
  }
  fc1 = register_module("fc1", torch::nn::Linear(c.d_model, c.ffn_dim));
  fc2 = register_module("fc2", torch::nn::Linear(c.ffn_dim, c.d_model));
  ffn_block = ResidualBlock(*this, "ffn", c, context);
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& padding_mask,
                                        const torch::Tensor& encoder_out,
                                        const torch::Tensor& encoder_padding_mask) {
  const bool train = is_training();
  auto h = self_attn_block.forward(
      x, [&](const torch::Tensor& t) { return self_attn(t, t, padding_mask, true); }, train);
  if (encoder_attn)
    h = encoder_attn_block.forward(
        h, [&](const torch::Tensor& t) { return encoder_attn(t, encoder_out, encoder_padding_mask, false); },
        train);
  return feed_forward_block(h, train);
}

torch::Tensor DecoderLayerImpl::forward_step(const torch::Tensor& x, DecoderCache& cache, size_t index) {
  const bool train = is_training();
  auto h = self_attn_block.forward(
      x,
      [&](const torch::Tensor& t) {
        return self_attn->forward_step(t, cache.append(index, self_attn->project_kv(t)));
      },
      train);
  if (encoder_attn)
    h = encoder_attn_block.forward(
        h, [&](const torch::Tensor& t) { return encoder_attn->forward_step(t, cache.encoder(index)); }, train);
  return feed_forward_block(h, train);
}

torch::Tensor DecoderLayerImpl::forward_prefill(const torch::Tensor& x, std::vector<KeyValues>& kept) {
  TORCH_CHECK(!encoder_attn, "forward_prefill: this decoder layer attends to an encoder");
  const bool train = is_training();
  auto h = self_attn_block.forward(
      x,
      [&](const torch::Tensor& t) {
        auto [y, kv] = self_attn->forward_prefill(t);
        kept.push_back(std::move(kv));
        return y;
      },
      train);
  return feed_forward_block(h, train);
}

KeyValues DecoderLayerImpl::prefill_keys_values(const torch::Tensor& x) {
  TORCH_CHECK(!encoder_attn, "prefill_keys_values: this decoder layer attends to an encoder");
  return self_attn->project_kv(self_attn_block.sublayer_input(x));
}

torch::Tensor DecoderLayerImpl::feed_forward_block(const torch::Tensor& h, bool train) {
  return ffn_block.forward(
      h, [&](const torch::Tensor& t) { return feed_forward(fc1, fc2, t, ffn_, train); }, train);
}

torch::Tensor activate(const torch::Tensor& x, Activation a) {
  switch (a) {
    case Activation::kRelu: return torch::relu(x);
    case Activation::kGelu: return torch::gelu(x);
    case Activation::kGeluTanh:  // bf16/fp16: one fused pass (model/kernels/gelu_tanh.h)
      return kernels::gelu_tanh_apply(x) ? kernels::gelu_tanh(x) : torch::gelu(x, "tanh");
  }
  return x;
}

torch::Tensor sinusoidal_table(int64_t d_model, int64_t rows) {
  // REFERENCE §1: half = C/2, freq_i = exp(-i ln(10000)/(half-1)), [sin | cos].
  const int64_t half = d_model / 2;
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  auto freq = torch::exp(torch::arange(half, opts) * (-std::log(10000.0) / std::max<int64_t>(half - 1, 1)));
  auto angles = torch::arange(rows, opts).unsqueeze(1) * freq.unsqueeze(0);
  return torch::cat({torch::sin(angles), torch::cos(angles)}, 1);
}

TokenEmbedding::TokenEmbedding(const ModelConfig& c)
    : scale_(embedding_scale(c)),
      sum_scale_(unit_scaled(c) ? kUnitSumScale : 1.0),
      max_positions_(c.max_positions),
      dropout_(c.dropout) {
  if (c.positions == PositionEmbedding::kSinusoidal) positions_ = sinusoidal_table(c.d_model, c.max_positions + kPositionOffset);
}

torch::nn::Embedding TokenEmbedding::register_positions(torch::nn::Module& module, const ModelConfig& c) {
  if (c.positions != PositionEmbedding::kLearned) return nullptr;
  return module.register_module("embed_positions",
                                torch::nn::Embedding(torch::nn::EmbeddingOptions(c.max_positions, c.d_model)));
}

torch::Tensor TokenEmbedding::forward(torch::nn::Embedding& table, const torch::nn::Embedding& learned,
                                      const torch::Tensor& tokens, bool training, int64_t first) const {
  return dropout(embed(table, learned, tokens, first), training);
}

torch::Tensor TokenEmbedding::dropout(const torch::Tensor& x, bool training) const {
  return model::dropout(x, dropout_, training);
}

torch::Tensor TokenEmbedding::embed(torch::nn::Embedding& table, const torch::nn::Embedding& learned,
                                    const torch::Tensor& tokens, int64_t first) const {
  const int64_t L = tokens.size(1), end = first + L;
  TORCH_CHECK(end <= max_positions_, "sentence of ", end, " tokens exceeds --max-positions ", max_positions_);
  auto weight = table->weight;
  auto pos = learned ? learned->weight.slice(0, first, end)
                     : positions_.slice(0, kPositionOffset + first, kPositionOffset + end)
                           .to(weight.device(), weight.scalar_type());  // (L,C)
  // fairseq gives padding tokens the zero position vector (their token row is zero too).
  auto x = table(tokens) * scale_ + pos.unsqueeze(0) * tokens.ne(kPad).unsqueeze(-1).to(weight.scalar_type());
  return sum_scale_ == 1.0 ? x : x * sum_scale_;
}

EncoderImpl::EncoderImpl(const ModelConfig& c)
    : embedding_(c) {
  embed_tokens = register_module(
      "embed_tokens", torch::nn::Embedding(torch::nn::EmbeddingOptions(c.src_vocab_size, c.d_model)));
  embed_positions = TokenEmbedding::register_positions(*this, c);
  if (c.segment_types > 0)
    segment_embeddings = register_module(
        "segment_embeddings", torch::nn::Embedding(torch::nn::EmbeddingOptions(c.segment_types, c.d_model)));
  if (c.embedding_norm) layernorm_embedding = register_module("layernorm_embedding", Norm(c.scheme.norm_kind, c.d_model));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.encoder_layers; ++i)
    layers->push_back(EncoderLayer(c, layer_context(c, false, i, admin_profile)));
  layer_norm = final_layer_norm(*this, c);
}

EncoderOut EncoderImpl::forward(const torch::Tensor& src, const torch::Tensor& segments) {
  auto padding_mask = src.eq(kPad);
  // fairseq's forward_embedding (and BERT's): tokens + positions (+ segments), the norm, dropout.
  auto x = embedding_.embed(embed_tokens, embed_positions, src);
  if (segment_embeddings)
    x = x + (segments.defined() ? segment_embeddings(segments.to(src.device()))
                                : segment_embeddings->weight[0].view({1, 1, -1}));
  if (layernorm_embedding) x = layernorm_embedding(x);
  x = embedding_.dropout(x, is_training());
  for (const auto& layer : *layers) x = layer->as<EncoderLayerImpl>()->forward(x, padding_mask);
  if (layer_norm) x = layer_norm(x);
  return {x, padding_mask};
}

DecoderImpl::DecoderImpl(const ModelConfig& c, torch::nn::Embedding shared_embedding)
    : embedding_(c), readout_multiplier_(readout_multiplier(c)) {
  if (shared_embedding) {
    embed_tokens = shared_embedding;  // owned (registered) by the encoder
  } else {
    embed_tokens = register_module(
        "embed_tokens", torch::nn::Embedding(torch::nn::EmbeddingOptions(c.tgt_vocab_size, c.d_model)));
  }
  embed_positions = TokenEmbedding::register_positions(*this, c);
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.decoder_layers; ++i)
    layers->push_back(DecoderLayer(c, layer_context(c, true, i, admin_profile)));
  layer_norm = final_layer_norm(*this, c);
  if (c.share == SharedEmbeddings::kNone) {
    output_projection = register_module(
        "output_projection",
        torch::nn::Linear(torch::nn::LinearOptions(c.d_model, c.tgt_vocab_size).bias(false)));
  }
}

torch::Tensor DecoderImpl::output_weight() const {
  return output_projection ? output_projection->weight : embed_tokens->weight;
}

torch::Tensor DecoderImpl::forward(const torch::Tensor& prev_output_tokens, const EncoderOut& encoder) {
  // fairseq masks padded target keys too; with right padding only padded rows change. On the
  // CPU, blocks without padding (a language model's contiguous blocks) skip the masking and its
  // gradient (on an accelerator the test would cost a synchronisation per forward).
  auto padding_mask = prev_output_tokens.eq(kPad);
  if (padding_mask.is_cpu() && !padding_mask.any().item<bool>()) padding_mask = torch::Tensor();
  auto x = embedding_.forward(embed_tokens, embed_positions, prev_output_tokens, is_training());
  for (const auto& layer : *layers)
    x = layer->as<DecoderLayerImpl>()->forward(x, padding_mask, encoder.out, encoder.padding_mask);
  return output(x);  // (B,T,V)
}

torch::Tensor DecoderImpl::output(const torch::Tensor& x) {
  auto h = layer_norm ? layer_norm(x) : x;
  if (readout_multiplier_ != 1.0) h = h * readout_multiplier_;  // MuReadout / MuSharedReadout
  return model::linear(h, output_weight());
}

DecoderCache DecoderImpl::start_decoding(const EncoderOut& encoder, int64_t max_positions) {
  std::vector<KeyValues> kv;
  for (const auto& layer : *layers) kv.push_back(layer->as<DecoderLayerImpl>()->encoder_attn->project_kv(encoder.out));
  const int64_t B = kv[0].k.size(0), H = kv[0].k.size(1), S = kv[0].k.size(2);
  auto bias = torch::zeros({B, 1, 1, S}, kv[0].k.options())
                  .masked_fill(encoder.padding_mask.view({B, 1, 1, S}), -std::numeric_limits<double>::infinity())
                  .expand({B, H, 1, S});
  return DecoderCache(std::move(kv), bias, max_positions);
}

DecoderCache DecoderImpl::start_decoding(int64_t max_positions) {
  TORCH_CHECK(!layers[0]->as<DecoderLayerImpl>()->encoder_attn, "start_decoding: this decoder attends to an encoder");
  return DecoderCache(layers->size(), max_positions);
}

void DecoderImpl::prefill(const torch::Tensor& tokens, DecoderCache& cache) {
  TORCH_CHECK(cache.steps() == 0, "prefill: the cache already holds ", cache.steps(), " positions");
  if (tokens.size(1) == 0 || layers->is_empty()) return;
  auto x = embedding_.forward(embed_tokens, embed_positions, tokens, is_training(), 0);  // (N,L,C)
  std::vector<KeyValues> kept;
  const size_t last = layers->size() - 1;  // its output is not used: its keys and values only
  for (size_t i = 0; i < last; ++i) x = layers[i]->as<DecoderLayerImpl>()->forward_prefill(x, kept);
  kept.push_back(layers[last]->as<DecoderLayerImpl>()->prefill_keys_values(x));
  cache.fill(kept);
}

torch::Tensor DecoderImpl::forward_step(const torch::Tensor& token, DecoderCache& cache) {
  auto x = embedding_.forward(embed_tokens, embed_positions, token, is_training(), cache.steps());  // (N,1,C)
  for (size_t i = 0; i < layers->size(); ++i) x = layers[i]->as<DecoderLayerImpl>()->forward_step(x, cache, i);
  cache.advance();
  return output(x).squeeze(1);  // (N,V)
}

}  // namespace normlab::model
