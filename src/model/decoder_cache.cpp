#include "model/decoder_cache.h"

#include <algorithm>
#include <utility>

#include <torch/torch.h>

namespace normlab::model {
namespace {

// Positions of the first allocation: most Multi30k/IWSLT outputs fit, and a longer one costs
// one copy per doubling.
constexpr int64_t kFirstCapacity = 64;

}  // namespace

DecoderCache::DecoderCache(std::vector<KeyValues> encoder, torch::Tensor encoder_bias, int64_t max_positions)
    : encoder_(std::move(encoder)), encoder_bias_(std::move(encoder_bias)), max_positions_(max_positions) {
  TORCH_CHECK(!encoder_.empty(), "DecoderCache needs at least one decoder layer");
  TORCH_CHECK(max_positions_ >= 1, "DecoderCache: max_positions must be >= 1, got ", max_positions_);
  // Contiguous, so that attention views (B,H,S,D) as (B*H,S,D) without a copy every step.
  for (auto& kv : encoder_) kv = {kv.k.contiguous(), kv.v.contiguous()};
  encoder_bias_ = encoder_bias_.contiguous();
}

void DecoderCache::reserve(int64_t positions) {
  TORCH_CHECK(positions <= max_positions_, "DecoderCache: position ", positions - 1,
              " is beyond the ", max_positions_, " positions it was made for");
  const int64_t capacity = self_.size(3);
  if (positions <= capacity) return;
  auto sizes = self_.sizes().vec();
  sizes[3] = std::min(std::max(2 * capacity, positions), max_positions_);
  auto bigger = torch::empty(sizes, self_.options());
  bigger.narrow(1, 0, rows_).narrow(3, 0, steps_).copy_(self_.narrow(1, 0, rows_).narrow(3, 0, steps_));
  self_ = std::move(bigger);
  spare_ = torch::Tensor();
}

KeyValues DecoderCache::append(size_t layer, const KeyValues& newest) {
  const int64_t n = newest.k.size(0);
  if (!self_.defined()) {
    rows_ = n;
    self_ = torch::empty({2 * static_cast<int64_t>(encoder_.size()), n, newest.k.size(1),
                          std::min(kFirstCapacity, max_positions_), newest.k.size(3)},
                         newest.k.options());
  }
  TORCH_CHECK(n == rows_, "DecoderCache: a step of ", n, " rows after ", rows_);
  TORCH_CHECK(layer < encoder_.size(), "DecoderCache: layer ", layer, " of ", encoder_.size());
  reserve(steps_ + 1);
  const auto l = static_cast<int64_t>(layer);
  auto k = self_.select(0, 2 * l).narrow(0, 0, rows_), v = self_.select(0, 2 * l + 1).narrow(0, 0, rows_);
  k.select(2, steps_).copy_(newest.k.select(2, 0));
  v.select(2, steps_).copy_(newest.v.select(2, 0));
  return {k.narrow(2, 0, steps_ + 1), v.narrow(2, 0, steps_ + 1)};
}

void DecoderCache::reorder(const torch::Tensor& rows, const torch::Tensor& sentences) {
  if (rows.defined() && self_.defined()) {
    // Into the spare buffer (a gather cannot write over its own input), which then becomes
    // the cache: each position is copied once, not index_select'ed and then appended to.
    if (!spare_.defined()) spare_ = torch::empty_like(self_);
    const int64_t n = rows.size(0);
    auto target = spare_.narrow(1, 0, n).narrow(3, 0, steps_);
    at::index_select_out(target, self_.narrow(1, 0, rows_).narrow(3, 0, steps_), 1, rows);
    std::swap(self_, spare_);
    rows_ = n;
  }
  if (sentences.defined()) {
    for (auto& kv : encoder_) kv = {kv.k.index_select(0, sentences), kv.v.index_select(0, sentences)};
    encoder_bias_ = encoder_bias_.index_select(0, sentences);
  }
}

}  // namespace normlab::model
