// --optimizer muon's split of the parameters (docs/optimisers.md, "muon"): Muon for the hidden
// weight matrices, AdamW for everything else, as Jordan et al. 2024 (the Muon repository's README:
// "embeddings, classifier heads, and hidden gains/biases should be optimized using standard
// AdamW") and Liu et al. 2025 (Moonlight's example: Muon where `p.ndim >= 2 and "embed_tokens" not
// in name and "lm_head" not in name`) split them, by normlab's parameter names.
#pragma once

#include <array>
#include <string>

#include <torch/types.h>

namespace normlab::train {

// The modules whose matrices muon leaves to AdamW: the embeddings (model/layers.cpp: token,
// learned position and segment tables) and the output layers, each head whole (the decoder's
// output_projection, the masked-LM head lm_head with its dense transform and vocabulary matrix,
// the classifier's classification_head with its dense and out_proj).
inline constexpr std::array<const char*, 6> kMuonAdamWModules{
    "embed_tokens", "embed_positions", "segment_embeddings", "output_projection", "lm_head", "classification_head"};

// Whether --optimizer muon updates parameter `p` named `name` (its model::named_parameters key,
// e.g. "decoder.layers.0.self_attn.out_proj.weight") with Muon: p has two dimensions and no
// dot-separated part of the name is one of kMuonAdamWModules. Every other parameter (biases, norm
// gains, ReZero's alpha, Admin's omega, embeddings, output layers, anything not 2-D) goes to AdamW.
// The decision is the name's and the shape's alone, so it is the same at every step and on resume.
bool muon_updates(const std::string& name, const torch::Tensor& p);

}  // namespace normlab::train
