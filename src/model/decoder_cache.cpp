#include "model/decoder_cache.h"

#include <utility>

#include <torch/torch.h>

#include "model/kernels/attention_step.h"

namespace normlab::model {

KeyValues SelfHistory::dense() const {
  std::vector<torch::Tensor> ks, vs;
  for (size_t p = 0; p < k.size(); ++p) {
    auto r = rows.select(1, static_cast<int64_t>(p));
    ks.push_back(k[p].index_select(0, r));
    vs.push_back(v[p].index_select(0, r));
  }
  return {torch::stack(ks, 2), torch::stack(vs, 2)};
}

DecoderCache::DecoderCache(std::vector<KeyValues> encoder, torch::Tensor encoder_bias, int64_t max_positions)
    : max_positions_(max_positions), self_(encoder.size()) {
  TORCH_CHECK(!encoder.empty(), "DecoderCache needs at least one decoder layer");
  TORCH_CHECK(max_positions_ >= 1, "DecoderCache: max_positions must be >= 1, got ", max_positions_);
  const auto& k = encoder.front().k;
  fused_ = kernels::attention_step_fused(k.scalar_type(), k.device(), k.size(3));
  encoder_bias = encoder_bias.contiguous();
  for (auto& kv : encoder) {
    // Contiguous: ATen's products view (B,H,S,D) as (B*H,S,D) without a copy every step, and
    // the fused kernel reads each head's positions as one block.
    encoder_.push_back({{kv.k.contiguous(), kv.v.contiguous()}, encoder_bias, {}});
  }
}

DecoderCache::DecoderCache(size_t layers, int64_t max_positions) : max_positions_(max_positions), self_(layers) {
  TORCH_CHECK(layers > 0, "DecoderCache needs at least one decoder layer");
  TORCH_CHECK(max_positions_ >= 1, "DecoderCache: max_positions must be >= 1, got ", max_positions_);
}

const SelfHistory& DecoderCache::append(size_t layer, const KeyValues& newest) {
  const int64_t n = newest.k.size(0);
  TORCH_CHECK(layer < self_.size(), "DecoderCache: layer ", layer, " of ", self_.size());
  TORCH_CHECK(steps_ < max_positions_, "DecoderCache: position ", steps_, " is beyond the ", max_positions_,
              " positions it was made for");
  auto& history = self_[layer];
  TORCH_CHECK(static_cast<int64_t>(history.k.size()) == steps_, "DecoderCache: layer ", layer,
              " appended twice at position ", steps_);
  if (!step_rows_.defined()) {  // the step's first layer: each row is its own newest position
    TORCH_CHECK(!rows_.defined() || rows_.size(0) == n, "DecoderCache: a step of ", n, " rows after ",
                rows_.size(0));
    auto own = torch::arange(n, torch::TensorOptions(torch::kLong).device(newest.k.device())).view({n, 1});
    step_rows_ = rows_.defined() ? torch::cat({rows_, own}, 1) : own;
  }
  TORCH_CHECK(step_rows_.size(0) == n, "DecoderCache: layer ", layer, " appended ", n, " rows at a step of ",
              step_rows_.size(0));
  history.k.push_back(newest.k.select(2, 0).contiguous());  // a view of the projection's (N,1,C) output
  history.v.push_back(newest.v.select(2, 0).contiguous());
  history.rows = step_rows_;
  return history;
}

void DecoderCache::advance() {
  for (size_t l = 0; l < self_.size(); ++l)
    TORCH_CHECK(static_cast<int64_t>(self_[l].k.size()) == steps_ + 1, "DecoderCache: layer ", l,
                " did not append position ", steps_);
  rows_ = std::move(step_rows_);
  step_rows_.reset();
  ++steps_;
}

void DecoderCache::fill(const std::vector<KeyValues>& layers) {
  TORCH_CHECK(steps_ == 0 && !step_rows_.defined(), "DecoderCache: fill after ", steps_, " positions");
  TORCH_CHECK(layers.size() == self_.size(), "DecoderCache: fill with ", layers.size(), " layers of ", self_.size());
  const int64_t n = layers.front().k.size(0), positions = layers.front().k.size(2);
  TORCH_CHECK(positions <= max_positions_, "DecoderCache: ", positions, " positions filled, made for ",
              max_positions_);
  if (positions == 0) return;
  auto rows = torch::arange(n, torch::TensorOptions(torch::kLong).device(layers.front().k.device()))
                  .view({n, 1})
                  .expand({n, positions})
                  .contiguous();
  for (size_t l = 0; l < layers.size(); ++l) {
    const auto& kv = layers[l];
    TORCH_CHECK(kv.k.size(0) == n && kv.k.size(2) == positions && kv.v.sizes() == kv.k.sizes(),
                "DecoderCache: layer ", l, "'s keys and values do not match layer 0's (N ", n, ", L ", positions, ")");
    auto& history = self_[l];
    for (int64_t p = 0; p < positions; ++p) {
      history.k.push_back(kv.k.select(2, p).contiguous());
      history.v.push_back(kv.v.select(2, p).contiguous());
    }
    history.rows = rows;
  }
  rows_ = rows;
  steps_ = positions;
}

void DecoderCache::reorder(const torch::Tensor& rows, const torch::Tensor& sentences) {
  TORCH_CHECK(!step_rows_.defined(), "DecoderCache: reorder in the middle of step ", steps_);
  if (rows.defined() && rows_.defined()) rows_ = rows_.index_select(0, rows.to(rows_.device(), torch::kLong));
  if (!sentences.defined()) return;
  TORCH_CHECK(!encoder_.empty(), "DecoderCache: sentences to keep, but no encoder memory");
  if (fused_) {  // the sentences' table, composed
    const auto& now = encoder_.front().sentences;
    auto table = now.defined() ? now.index_select(0, sentences.to(now.device(), torch::kLong))
                               : sentences.to(torch::kCPU, torch::kLong).contiguous();
    for (auto& memory : encoder_) memory.sentences = table;
    return;
  }
  auto bias = encoder_.front().bias.index_select(0, sentences);
  for (auto& memory : encoder_)
    memory = {{memory.kv.k.index_select(0, sentences), memory.kv.v.index_select(0, sentences)}, bias, {}};
}

}  // namespace normlab::model
