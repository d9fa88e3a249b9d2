#include "model/decoder_cache.h"

#include <algorithm>
#include <utility>

#include <torch/torch.h>

namespace normlab::model {

DecoderCache::DecoderCache(std::vector<KeyValues> encoder, torch::Tensor encoder_bias, int64_t max_positions)
    : encoder_(std::move(encoder)), encoder_bias_(std::move(encoder_bias)), max_positions_(max_positions) {
  TORCH_CHECK(!encoder_.empty(), "DecoderCache needs at least one decoder layer");
  TORCH_CHECK(max_positions_ >= 1, "DecoderCache: max_positions must be >= 1, got ", max_positions_);
  // Contiguous, so that attention views (B,H,S,D) as (B*H,S,D) without a copy every step.
  for (auto& kv : encoder_) kv = {kv.k.contiguous(), kv.v.contiguous()};
  encoder_bias_ = encoder_bias_.contiguous();
}

torch::Tensor DecoderCache::laid_out(torch::Tensor& storage, int64_t n, int64_t positions) const {
  auto sizes = view_.sizes().vec();
  sizes[1] = n;
  sizes[3] = positions;
  const int64_t need = c10::multiply_integers(sizes), held = storage.defined() ? storage.numel() : 0;
  if (held < need) storage = torch::empty({std::max(need, 2 * held)}, view_.options());
  return storage.narrow(0, 0, need).view(sizes);
}

void DecoderCache::relayout(const torch::Tensor& rows) {
  auto target = laid_out(spare_, rows.defined() ? rows.size(0) : view_.size(1), steps_ + 1);
  auto filled = target.narrow(3, 0, steps_), source = view_.narrow(3, 0, steps_);
  if (rows.defined()) {
    at::index_select_out(filled, source, 1, rows);
  } else {
    filled.copy_(source);
  }
  std::swap(self_, spare_);
  view_ = target;
}

KeyValues DecoderCache::append(size_t layer, const KeyValues& newest) {
  const int64_t n = newest.k.size(0), layers = static_cast<int64_t>(encoder_.size());
  TORCH_CHECK(layer < encoder_.size(), "DecoderCache: layer ", layer, " of ", encoder_.size());
  TORCH_CHECK(steps_ < max_positions_, "DecoderCache: position ", steps_, " is beyond the ", max_positions_,
              " positions it was made for");
  if (!view_.defined()) {
    const std::vector<int64_t> sizes = {2 * layers, n, newest.k.size(1), 1, newest.k.size(3)};
    self_ = torch::empty({c10::multiply_integers(sizes)}, newest.k.options());
    view_ = self_.view(sizes);
  }
  TORCH_CHECK(n == view_.size(1), "DecoderCache: a step of ", n, " rows after ", view_.size(1));
  if (view_.size(3) == steps_) relayout({});  // no reorder since the last step: make room
  const auto l = static_cast<int64_t>(layer);
  auto k = view_.select(0, 2 * l), v = view_.select(0, 2 * l + 1);
  k.select(2, steps_).copy_(newest.k.select(2, 0));
  v.select(2, steps_).copy_(newest.v.select(2, 0));
  return {k, v};
}

void DecoderCache::reorder(const torch::Tensor& rows, const torch::Tensor& sentences) {
  if (rows.defined() && view_.defined()) relayout(rows);
  if (sentences.defined()) {
    for (auto& kv : encoder_) kv = {kv.k.index_select(0, sentences), kv.v.index_select(0, sentences)};
    encoder_bias_ = encoder_bias_.index_select(0, sentences);
  }
}

}  // namespace normlab::model
