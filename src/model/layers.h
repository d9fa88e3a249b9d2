// Encoder and decoder stacks with fairseq's parameter names (docs/conventions.md).
#pragma once

#include <memory>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "model/attention.h"
#include "model/config.h"
#include "model/decoder_cache.h"
#include "model/norm.h"
#include "model/residual_block.h"

namespace normlab::model {

// A layer's feed-forward sub-layer: fc2(dropout(act(fc1(x)))), with u-muP's forward scales on fc1's
// and fc2's outputs (1/sqrt(fan_in)) and on the activation's (U.gelu's); 1 otherwise.
struct FeedForwardSettings {
  explicit FeedForwardSettings(const ModelConfig& c);
  Activation activation;
  double dropout;
  double fc1_scale = 1.0, activation_scale = 1.0, fc2_scale = 1.0;
};

class EncoderLayerImpl : public torch::nn::Module {
 public:
  // `context` says where the layer sits; its rezero_alpha is registered here.
  EncoderLayerImpl(const ModelConfig& config, BlockContext context);
  // x (B,S,C), padding_mask (B,S) -> (B,S,C)
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& padding_mask);

  MultiheadAttention self_attn{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::Tensor rezero_alpha;  // ReZero only
  ResidualBlock self_attn_block, ffn_block;

 private:
  FeedForwardSettings ffn_;
};
TORCH_MODULE(EncoderLayer);

// A decoder layer; without encoder attention (encoder_attn null) in a single-stack model
// (ModelConfig::single_stack()).
class DecoderLayerImpl : public torch::nn::Module {
 public:
  DecoderLayerImpl(const ModelConfig& config, BlockContext context);
  // x (B,T,C), padding_mask (B,T), encoder_out (B,S,C), encoder_padding_mask (B,S) -> (B,T,C);
  // the encoder's tensors are not read (and may be undefined) without encoder attention.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& padding_mask,
                        const torch::Tensor& encoder_out, const torch::Tensor& encoder_padding_mask);
  // One decoding step: x (N,1,C) the newest position, earlier ones in `cache`, where this
  // is layer `index` -> (N,1,C).
  torch::Tensor forward_step(const torch::Tensor& x, DecoderCache& cache, size_t index);
  // A prompt x (N,L,C) at positions 0..L-1 in one pass (no encoder attention) -> (N,L,C); the
  // self-attention's keys and values (N,H,L,D) are appended to `kept` for DecoderCache::fill.
  torch::Tensor forward_prefill(const torch::Tensor& x, std::vector<KeyValues>& kept);
  // Only the self-attention's keys and values of a prompt x (N,L,C): what forward_prefill keeps,
  // for the last layer, whose output a prefill does not use.
  KeyValues prefill_keys_values(const torch::Tensor& x);

  MultiheadAttention self_attn{nullptr}, encoder_attn{nullptr};  // encoder_attn: with an encoder only
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::Tensor rezero_alpha;  // ReZero only
  ResidualBlock self_attn_block, encoder_attn_block, ffn_block;

 private:
  torch::Tensor feed_forward_block(const torch::Tensor& h, bool train);

  FeedForwardSettings ffn_;
};
TORCH_MODULE(DecoderLayer);

// The feed-forward activation `a` of x (ReLU, GELU, GELU-tanh).
torch::Tensor activate(const torch::Tensor& x, Activation a);

// fairseq's sinusoidal position table (REFERENCE §1) for positions 0..rows-1 (the token at
// index t reads row t + kPositionOffset), float64 (rows, C).
torch::Tensor sinusoidal_table(int64_t d_model, int64_t rows);

// scale * E[token] + position, then dropout (fairseq's embedding): scale sqrt(C) unless
// !scale_embedding, the position sinusoidal or a learned table's row (ModelConfig::positions).
class TokenEmbedding {
 public:
  explicit TokenEmbedding(const ModelConfig& config);
  // The learned position table (max_positions, C) that `module` registers as "embed_positions"
  // when the config asks for one, else null.
  static torch::nn::Embedding register_positions(torch::nn::Module& module, const ModelConfig& config);
  // tokens (B,L) at positions first, first+1, ... -> (B,L,C); `learned`: register_positions'.
  torch::Tensor forward(torch::nn::Embedding& table, const torch::nn::Embedding& learned, const torch::Tensor& tokens,
                        bool training, int64_t first = 0) const;
  // The same before dropout, for an embedding that adds more (the encoder's segments and norm).
  torch::Tensor embed(torch::nn::Embedding& table, const torch::nn::Embedding& learned, const torch::Tensor& tokens,
                      int64_t first = 0) const;
  torch::Tensor dropout(const torch::Tensor& x, bool training) const;

 private:
  double scale_;
  double sum_scale_;  // on token + position: u-muP's unit-scaled add, else 1
  int64_t max_positions_;
  double dropout_;
  torch::Tensor positions_;  // sinusoidal: (max_positions + offset, C), float64 master copy
};

struct EncoderOut {
  torch::Tensor out;           // (B,S,C)
  torch::Tensor padding_mask;  // (B,S) bool, true at padding
};

class EncoderImpl : public torch::nn::Module {
 public:
  explicit EncoderImpl(const ModelConfig& config);
  // src (B,S) token ids; segments (B,S) their segment ids (ModelConfig::segment_types; undefined:
  // segment 0 everywhere).
  EncoderOut forward(const torch::Tensor& src, const torch::Tensor& segments = {});

  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::Embedding embed_positions{nullptr};      // learned positions only
  torch::nn::Embedding segment_embeddings{nullptr};   // with segment types only (BERT's token types)
  Norm layernorm_embedding{nullptr};                  // ModelConfig::embedding_norm only
  torch::nn::ModuleList layers{nullptr};
  Norm layer_norm{nullptr};  // the final norm (pre, peri, mix: has_final_norm()), else null
  std::shared_ptr<AdminProfile> admin_profile = std::make_shared<AdminProfile>();

 private:
  TokenEmbedding embedding_;
};
TORCH_MODULE(Encoder);

class DecoderImpl : public torch::nn::Module {
 public:
  // `shared_embedding` is the encoder's table when all embeddings are shared, else null.
  DecoderImpl(const ModelConfig& config, torch::nn::Embedding shared_embedding);
  // prev_output_tokens (B,T) -> logits (B,T,V)
  torch::Tensor forward(const torch::Tensor& prev_output_tokens, const EncoderOut& encoder);
  // Incremental decoding of the B sentences in `encoder`, each in N/B consecutive rows (its
  // beams), for at most `max_positions` steps: every layer's encoder keys and values,
  // projected once, in a cache that forward_step() fills.
  DecoderCache start_decoding(const EncoderOut& encoder, int64_t max_positions);
  // The same for a decoder without encoder attention (the decoder-only kind).
  DecoderCache start_decoding(int64_t max_positions);
  // One step of incremental decoding: the newest token (N,1) at position cache.steps(), the
  // earlier ones held in `cache` -> logits (N,V); advances cache. Equals the last row of
  // forward() on the whole prefix (within float rounding).
  torch::Tensor forward_step(const torch::Tensor& token, DecoderCache& cache);
  // Feeds a prompt's tokens (N,L) at positions 0..L-1 into a fresh `cache` in one forward pass
  // (decoder-only kind): the cache then holds what L forward_step()s would leave (within float
  // rounding), without their logits.
  void prefill(const torch::Tensor& tokens, DecoderCache& cache);
  // The output projection (V,C): the decoder's table when shared, else its own matrix.
  torch::Tensor output_weight() const;

  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::Embedding embed_positions{nullptr};  // learned positions only
  torch::nn::ModuleList layers{nullptr};
  Norm layer_norm{nullptr};                      // the final norm, as the encoder's
  torch::nn::Linear output_projection{nullptr};  // only when not shared
  std::shared_ptr<AdminProfile> admin_profile = std::make_shared<AdminProfile>();

 private:
  // final norm (if any), muP's readout multiplier (when not 1), projection to V
  torch::Tensor output(const torch::Tensor& x);

  TokenEmbedding embedding_;
  double readout_multiplier_;  // model/width.h
};
TORCH_MODULE(Decoder);

}  // namespace normlab::model
