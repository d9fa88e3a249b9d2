// Where the instruments look: every residual block of a model with its stack, layer and
// LayerNorm name, and where a parameter sits (docs/probe.md, "Names").
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "model/model.h"

namespace normlab::analysis {

struct BlockSite {
  std::string stack;             // encoder | decoder
  int64_t layer = 0;             // 0-based
  std::string ln;                // fairseq name of the block's LayerNorm, e.g. final_layer_norm
  model::ResidualBlock* block = nullptr;
  bool ffn = false;              // the layer's FFN block (its last)
  bool last = false;             // the stack's last block
  std::string name;              // self_attn | encoder_attn | ffn
};

// Every stack's blocks (ModelImpl::stacks(): the encoder's, then the decoder's), in forward order.
std::vector<BlockSite> block_sites(model::Model net);
// Removes every block's observer.
void clear_observers(model::Model net);

struct ParamSite {
  std::string stack;  // encoder | decoder | embedding
  int64_t layer = -1; // -1 outside the layers
};
// "encoder.layers.3.fc1.weight" -> {encoder, 3}; embedding tables and the output projection
// -> {embedding, -1}; "decoder.layer_norm.weight" -> {decoder, -1}.
ParamSite param_site(const std::string& name);

// Tokens that are not padding, as (B,T) float64 weights (1 or 0).
torch::Tensor token_weights(const torch::Tensor& tokens);

// x (B,T,C), weights (B,T) -> rows (N,C) of the weighted (non-padding) tokens.
torch::Tensor real_rows(const torch::Tensor& x, const torch::Tensor& weights);

// Mean and sample standard deviation (0 for one value).
std::pair<double, double> mean_and_sd(const std::vector<double>& values);

// A CSV field: %.9g, "inf"/"-inf", and the empty field for NaN (no value).
std::string csv_number(double v);

}  // namespace normlab::analysis
