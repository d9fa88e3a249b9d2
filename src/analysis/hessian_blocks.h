// Blocks of a Hessian's parameters and the extreme eigenvalues of its diagonal blocks (the
// principal submatrices on a block's coordinates): `normlab hessian --per-block` and
// `train --curvature-per-block` (docs/hessian.md, docs/curvature.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/hvp.h"
#include "analysis/lanczos.h"

namespace normlab::analysis {

// A layer's parameters: "encoder.layers.I", "decoder.layers.I", "embeddings" (token tables and
// output projection) or "other" (final norms, ...).
std::string parameter_block(const std::string& name);
// Finer, per sub-layer: "<stack>.layers.I.<attn>.qk" (q_proj, k_proj, and QK-norm's q_norm,
// k_norm), "<stack>.layers.I.<attn>.vo" (v_proj, out_proj), "<stack>.layers.I.ffn" (fc1, fc2),
// "<stack>.layers.I.norms" (the layer's norms, Admin's omegas, ReZero's alpha), "embeddings",
// "other". <attn> is self_attn or encoder_attn.
std::string sublayer_block(const std::string& name);

struct ParameterBlock {
  std::string name;
  std::vector<std::pair<int64_t, int64_t>> ranges;  // {offset, length} in the flat vector
  int64_t size = 0;                                 // coordinates
};
// The Hessian's parameters grouped by `block_of(name)`, blocks in the order first seen.
std::vector<ParameterBlock> parameter_blocks(const FullDataHessian& h,
                                             const std::function<std::string(const std::string&)>& block_of);

// `steps` Lanczos steps (at most the block's size) on the diagonal block, from the Rademacher
// vector of `seed`: its Ritz values (nodes, ascending).
TridiagonalEigen block_spectrum(const LinearOperator& hvp, int64_t dim, const ParameterBlock& block,
                                int64_t steps, uint64_t seed, torch::Dtype dtype);

}  // namespace normlab::analysis
