#include "data/masking.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <torch/torch.h>

#include "core/hash.h"
#include "core/tokens.h"

namespace normlab::data {

std::vector<std::string> MaskingConfig::problems() const {
  std::vector<std::string> out;
  for (auto [v, option] : {std::pair{mask_prob, "--mask-prob"}, std::pair{leave_unmasked_prob, "--leave-unmasked-prob"},
                           std::pair{random_token_prob, "--random-token-prob"}})
    if (!(v >= 0.0 && v <= 1.0)) out.push_back(std::string(option) + " must be in [0, 1], got " + std::to_string(v));
  if (mask_prob <= 0.0) out.push_back("--mask-prob must be positive: a masked LM predicts the tokens it masks");
  if (leave_unmasked_prob + random_token_prob > 1.0)
    out.push_back("--leave-unmasked-prob + --random-token-prob must be at most 1, got " +
                  std::to_string(leave_unmasked_prob + random_token_prob));
  return out;
}

namespace {

// One example's generator: its own stream for (seed, epoch, index).
std::mt19937_64 example_generator(uint64_t seed, int64_t epoch, int64_t index) {
  const uint64_t key[3] = {seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(index)};
  return std::mt19937_64(core::hash_bytes(key, sizeof key));
}

// Masks one row of `n` positions (src, target: pointers to its first entry).
void mask_row(int64_t* src, int64_t* target, int64_t n, const MaskingConfig& c, const MaskTokens& t,
              std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<int64_t> candidates;
  for (int64_t j = 0; j < n; ++j)
    if (src[j] != kPad && !(j == 0 && src[j] == kBos)) candidates.push_back(j);
  const auto count = std::min<int64_t>(
      static_cast<int64_t>(candidates.size()),
      std::max<int64_t>(1, static_cast<int64_t>(std::floor(c.mask_prob * static_cast<double>(candidates.size()) + unit(rng)))));
  // A partial Fisher-Yates shuffle: the first `count` candidates are a uniform sample.
  for (int64_t i = 0; i < count; ++i) {
    std::uniform_int_distribution<int64_t> pick(i, static_cast<int64_t>(candidates.size()) - 1);
    std::swap(candidates[static_cast<size_t>(i)], candidates[static_cast<size_t>(pick(rng))]);
  }
  std::vector<bool> chosen(static_cast<size_t>(n), false);
  std::uniform_int_distribution<int64_t> random_token(t.first_random, t.end_random - 1);
  for (int64_t i = 0; i < count; ++i) {
    const auto j = candidates[static_cast<size_t>(i)];
    chosen[static_cast<size_t>(j)] = true;
    const double u = unit(rng);
    if (u < c.leave_unmasked_prob) continue;
    src[j] = u < c.leave_unmasked_prob + c.random_token_prob ? random_token(rng) : t.mask;
  }
  for (int64_t j = 0; j < n; ++j)
    if (!chosen[static_cast<size_t>(j)]) target[j] = kPad;
}

}  // namespace

void mask_batch(Batch& batch, const std::vector<int64_t>& indices, const MaskingConfig& config,
                const MaskTokens& tokens, uint64_t seed, int64_t epoch) {
  TORCH_CHECK(tokens.end_random > tokens.first_random, "mask_batch: no ordinary token to draw replacements from");
  batch.src = batch.src.contiguous();
  batch.target = batch.target.contiguous();
  const int64_t rows = batch.src.size(0), n = batch.src.size(1);
  TORCH_CHECK(rows == static_cast<int64_t>(indices.size()), "mask_batch: ", rows, " rows but ", indices.size(),
              " example indices");
  auto* src = batch.src.data_ptr<int64_t>();
  auto* target = batch.target.data_ptr<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    auto rng = example_generator(seed, epoch, indices[static_cast<size_t>(r)]);
    mask_row(src + r * n, target + r * n, n, config, tokens, rng);
  }
  batch.target_tokens = batch.target.ne(kPad).sum().item<int64_t>();
}

}  // namespace normlab::data
