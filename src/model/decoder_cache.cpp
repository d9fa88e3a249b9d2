#include "model/decoder_cache.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

namespace normlab::model {
namespace {

// target (G, n, H, P + 1, D) positions 0..P-1 <- source (G, m, H, P, D) rows `rows` (int64 (n),
// each in [0, m); all rows in order when undefined), both contiguous on the CPU: one memcpy per
// (g, row, head) block of P x D elements, where index_select into the strided positions view
// ran at about 0.7x copy speed (docs/performance.md).
void copy_blocks(const torch::Tensor& target, const torch::Tensor& source, const torch::Tensor& rows) {
  RECORD_FUNCTION("normlab::DecoderCache::copy_blocks", std::vector<c10::IValue>());
  const int64_t G = source.size(0), m = source.size(1), H = source.size(2), n = target.size(1);
  const int64_t block = source.size(3) * source.size(4) * source.element_size();
  const int64_t target_block = target.size(3) * target.size(4) * target.element_size();
  torch::Tensor index = rows.defined() ? rows.to(torch::kCPU, torch::kLong).contiguous() : torch::Tensor();
  const int64_t* idx = index.defined() ? index.data_ptr<int64_t>() : nullptr;
  TORCH_CHECK(idx || n == m, "DecoderCache: ", n, " rows from ", m, " without an index");
  for (int64_t i = 0; idx && i < n; ++i)
    TORCH_CHECK(idx[i] >= 0 && idx[i] < m, "DecoderCache: row ", idx[i], " of ", m);
  auto* dst = static_cast<char*>(target.data_ptr());
  const auto* src = static_cast<const char*>(source.data_ptr());
  at::parallel_for(0, G * n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t gi = begin; gi < end; ++gi) {
      const int64_t g = gi / n, i = gi % n, r = idx ? idx[i] : i;
      for (int64_t h = 0; h < H; ++h)
        std::memcpy(dst + ((g * n + i) * H + h) * target_block, src + ((g * m + r) * H + h) * block,
                    static_cast<size_t>(block));
    }
  });
}

}  // namespace

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
  if (source.is_cpu() && source.is_contiguous()) {
    copy_blocks(target, source, rows);
  } else if (rows.defined()) {  // CUDA: ATen's gather
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
