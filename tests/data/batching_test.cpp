// Token batching: the padded-token bound, every example once, determinism, a new batch order
// every epoch, ascending sizes within a batch, and a hand-worked greedy cut.
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "data/batching.h"

using namespace normlab::data;

namespace {

// Sizes like a corpus's: many ties, a long tail.
std::vector<int64_t> random_sizes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::gamma_distribution<double> len(4.0, 4.0);
  std::vector<int64_t> sizes(n);
  for (auto& s : sizes) s = 1 + std::min<int64_t>(static_cast<int64_t>(len(rng)), 120);
  return sizes;
}

int64_t padded_tokens(const std::vector<int64_t>& batch, const std::vector<int64_t>& sizes) {
  int64_t largest = 0;
  for (const auto i : batch) largest = std::max(largest, sizes[static_cast<size_t>(i)]);
  return largest * static_cast<int64_t>(batch.size());
}

}  // namespace

TEST(Batching, ExampleSizeCountsTheEndOfSentenceToken) {
  EXPECT_EQ(example_sizes({{5, 6, 7}, {}, {5}}, {{5, 6, 7, 8, 9}, {5}, {}}), (std::vector<int64_t>{6, 2, 2}));
}

TEST(Batching, HandWorkedGreedyCut) {
  // Sorted sizes 1, 2, 2, 3, 5 with max_tokens 6: {1,2,2} is 3*2 = 6 tokens; adding 3 would be
  // 4*3 = 12; {3} then {5}, since 2*5 = 10 > 6.
  const std::vector<int64_t> sizes = {3, 1, 2, 2, 5};
  auto batches = make_batches(sizes, {6, 0}, 1, 1);
  for (auto& b : batches) std::sort(b.begin(), b.end());
  std::sort(batches.begin(), batches.end());
  EXPECT_EQ(batches, (std::vector<std::vector<int64_t>>{{0}, {1, 2, 3}, {4}}));
  // At most 2 sentences, no token bound: {1,2} {2,3} {5}, i.e. indices {1, 2|3}, {3|2, 0}, {4}.
  auto by_two = make_batches(sizes, {0, 2}, 1, 1);
  for (auto& b : by_two) std::sort(b.begin(), b.end());
  std::sort(by_two.begin(), by_two.end());
  ASSERT_EQ(by_two.size(), 3u);
  EXPECT_TRUE(by_two[0] == (std::vector<int64_t>{0, 2}) || by_two[0] == (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(by_two[1][0], 1);
  EXPECT_EQ(by_two[2], (std::vector<int64_t>{4}));
}

TEST(Batching, InvariantsOnACorpusSizedExample) {
  const auto sizes = random_sizes(3000, 11);
  for (const BatchingConfig config : {BatchingConfig{256, 0}, BatchingConfig{1024, 16}, BatchingConfig{0, 7}}) {
    const auto batches = make_batches(sizes, config, 123, 1);
    std::vector<int> seen(sizes.size(), 0);
    for (const auto& b : batches) {
      ASSERT_FALSE(b.empty());
      if (config.max_tokens > 0) {
        EXPECT_LE(padded_tokens(b, sizes), config.max_tokens);
      }
      if (config.max_sentences > 0) {
        EXPECT_LE(static_cast<int64_t>(b.size()), config.max_sentences);
      }
      for (size_t k = 1; k < b.size(); ++k)
        EXPECT_LE(sizes[static_cast<size_t>(b[k - 1])], sizes[static_cast<size_t>(b[k])]) << "not ascending";
      for (const auto i : b) ++seen[static_cast<size_t>(i)];
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
    // Greedy: in the size-sorted sequence (batches by first size, last size, then larger
    // first), the next example would break a bound of every batch but the last.
    auto sorted = batches;
    const auto sz = [&](int64_t i) { return sizes[static_cast<size_t>(i)]; };
    std::sort(sorted.begin(), sorted.end(), [&](const auto& a, const auto& b) {
      return std::make_tuple(sz(a.front()), sz(a.back()), -static_cast<int64_t>(a.size())) <
             std::make_tuple(sz(b.front()), sz(b.back()), -static_cast<int64_t>(b.size()));
    });
    int64_t loose = 0;
    for (size_t k = 0; k + 1 < sorted.size(); ++k) {
      EXPECT_LE(sz(sorted[k].back()), sz(sorted[k + 1].front()));
      const int64_t n = static_cast<int64_t>(sorted[k].size()) + 1;
      const bool full = (config.max_sentences > 0 && n > config.max_sentences) ||
                        (config.max_tokens > 0 && n * sz(sorted[k + 1].front()) > config.max_tokens);
      loose += !full;
    }
    EXPECT_EQ(loose, 0);
  }
}

TEST(Batching, DeterministicPerSeedAndEpochNewOrderEachEpoch) {
  const auto sizes = random_sizes(2000, 5);
  const BatchingConfig config{512, 0};
  EXPECT_EQ(make_batches(sizes, config, 7, 3), make_batches(sizes, config, 7, 3));
  std::set<std::vector<std::vector<int64_t>>> orders;
  const auto as_set = [](std::vector<std::vector<int64_t>> b) {
    std::sort(b.begin(), b.end());
    return b;
  };
  const auto epoch1 = make_batches(sizes, config, 7, 1);
  for (int64_t epoch = 1; epoch <= 5; ++epoch) {
    const auto b = make_batches(sizes, config, 7, epoch);
    orders.insert(b);
    EXPECT_EQ(as_set(b), as_set(epoch1)) << "the same batches every epoch (fairseq's frozen batches)";
  }
  EXPECT_EQ(orders.size(), 5u) << "every epoch a different order";
  // Another seed breaks the many size ties differently.
  EXPECT_NE(as_set(make_batches(sizes, config, 8, 1)), as_set(epoch1));
}

TEST(Batching, SubsetsAndBadInput) {
  const std::vector<int64_t> sizes = {4, 9, 2, 30, 3};
  auto subset = make_batches(sizes, {0, 2, 4}, {8, 0}, 1, 1);
  std::vector<int64_t> got;
  for (const auto& b : subset) got.insert(got.end(), b.begin(), b.end());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int64_t>{0, 2, 4}));
  try {
    make_batches(sizes, {16, 0}, 1, 1);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("example 3 has 30 tokens"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--max-tokens 16"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_batches(sizes, {0, 1, 1}, {64, 0}, 1, 1), std::invalid_argument);
  EXPECT_THROW(make_batches(sizes, {0, 5}, {64, 0}, 1, 1), std::invalid_argument);
  EXPECT_THROW(make_batches(sizes, {0, 0}, 1, 1), std::invalid_argument);
  EXPECT_THROW(make_batches(sizes, {-1, 0}, 1, 1), std::invalid_argument);
  EXPECT_TRUE(make_batches({}, {64, 0}, 1, 1).empty());
}
