#include "data/batching.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>

#include "core/problems.h"

namespace normlab::data {
namespace {

// splitmix64's finaliser: turns (seed, stream) into well-separated generator seeds.
uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Fisher-Yates with rejection sampling: std::shuffle's algorithm differs between standard
// libraries, mt19937_64's output does not, so batches are the same on every platform.
template <typename T>
void shuffle(std::vector<T>& v, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t i = v.size(); i > 1; --i) {
    const uint64_t n = i, limit = std::mt19937_64::max() - std::mt19937_64::max() % n;
    uint64_t r;
    do r = rng(); while (r >= limit);
    std::swap(v[i - 1], v[r % n]);
  }
}

constexpr uint64_t kTieBreakStream = 1, kEpochStream = 2;

}  // namespace

std::vector<std::string> BatchingConfig::validate() const {
  std::vector<std::string> problems;
  if (max_tokens < 0) problems.push_back("--max-tokens must be >= 0 (0: no limit), got " + std::to_string(max_tokens));
  if (max_sentences < 0)
    problems.push_back("--max-sentences must be >= 0 (0: no limit), got " + std::to_string(max_sentences));
  if (max_tokens == 0 && max_sentences == 0)
    problems.push_back("--max-tokens and --max-sentences are both 0: one of them must bound a batch");
  return problems;
}

std::vector<int64_t> example_sizes(const std::vector<Sentence>& src, const std::vector<Sentence>& tgt,
                                   Layout layout) {
  if (layout == Layout::kBlocks) {
    std::vector<int64_t> sizes;
    for (const auto& block : tgt) sizes.push_back(std::max<int64_t>(static_cast<int64_t>(block.size()) - 1, 0));
    return sizes;
  }
  if (layout == Layout::kMaskedBlocks || layout == Layout::kClassify) {
    std::vector<int64_t> sizes;
    for (const auto& block : src) sizes.push_back(static_cast<int64_t>(block.size()));
    return sizes;
  }
  if (src.size() != tgt.size())
    throw std::invalid_argument("example_sizes: " + std::to_string(src.size()) + " source but " +
                                std::to_string(tgt.size()) + " target sentences");
  std::vector<int64_t> sizes(src.size());
  for (size_t i = 0; i < src.size(); ++i)
    sizes[i] = static_cast<int64_t>(std::max(src[i].size(), tgt[i].size())) + 1;  // + </s>
  return sizes;
}

std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& sizes,
                                               const std::vector<int64_t>& indices,
                                               const BatchingConfig& config, uint64_t seed,
                                               int64_t epoch) {
  core::throw_if_problems(config.validate());
  std::vector<char> seen(sizes.size(), 0);
  for (const auto i : indices) {
    if (i < 0 || static_cast<size_t>(i) >= sizes.size())
      throw std::invalid_argument("make_batches: example index " + std::to_string(i) + " outside [0, " +
                                  std::to_string(sizes.size()) + ")");
    if (seen[static_cast<size_t>(i)]++)
      throw std::invalid_argument("make_batches: example " + std::to_string(i) + " listed twice");
    if (sizes[static_cast<size_t>(i)] < 1)
      throw std::invalid_argument("make_batches: example " + std::to_string(i) + " has size " +
                                  std::to_string(sizes[static_cast<size_t>(i)]) + " (sizes count </s>, so >= 1)");
    if (config.max_tokens > 0 && sizes[static_cast<size_t>(i)] > config.max_tokens)
      throw std::invalid_argument("example " + std::to_string(i) + " has " + std::to_string(sizes[static_cast<size_t>(i)]) +
                                  " tokens (max(n+1, m+1)), more than --max-tokens " +
                                  std::to_string(config.max_tokens) +
                                  "; raise --max-tokens or drop it with --max-positions <= --max-tokens");
  }
  // Random order first, then a stable sort by size: ties stay in random order (fairseq's
  // ordered_indices). The tie-break depends on the seed only, so the batches are the same
  // sets every epoch, as fairseq's frozen batches are.
  std::vector<int64_t> order = indices;
  shuffle(order, mix(seed ^ mix(kTieBreakStream)));
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return sizes[static_cast<size_t>(a)] < sizes[static_cast<size_t>(b)]; });

  // Greedy cut (fairseq's batch_by_size): close the batch when one more example would exceed
  // max_sentences, or make sentences * largest size exceed max_tokens.
  std::vector<std::vector<int64_t>> batches;
  std::vector<int64_t> batch;
  int64_t largest = 0;
  for (const auto i : order) {
    const int64_t size = sizes[static_cast<size_t>(i)];
    const int64_t count = static_cast<int64_t>(batch.size()) + 1;
    const bool full = !batch.empty() &&
                      ((config.max_sentences > 0 && count > config.max_sentences) ||
                       (config.max_tokens > 0 && count * std::max(largest, size) > config.max_tokens));
    if (full) {
      batches.push_back(std::move(batch));
      batch.clear();
      largest = 0;
    }
    batch.push_back(i);
    largest = std::max(largest, size);
  }
  if (!batch.empty()) batches.push_back(std::move(batch));

  // Batch order per epoch (fairseq: numpy seed = seed + epoch).
  shuffle(batches, mix(mix(seed ^ mix(kEpochStream)) + static_cast<uint64_t>(epoch)));
  return batches;
}

std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& sizes,
                                               const BatchingConfig& config, uint64_t seed,
                                               int64_t epoch) {
  std::vector<int64_t> all(sizes.size());
  std::iota(all.begin(), all.end(), int64_t{0});
  return make_batches(sizes, all, config, seed, epoch);
}

}  // namespace normlab::data
