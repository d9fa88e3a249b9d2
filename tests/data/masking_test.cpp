// BERT's masking (data/masking.h) against its definition: the number chosen per block
// (floor(p n + u), at least one), never <s> or padding, the 80/10/10 split within binomial bounds,
// targets exactly at the chosen positions, masks that depend on (seed, epoch, example) only, and
// the masked-LM blocks of a text stream.
#include <cmath>
#include <numeric>
#include <set>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/tokens.h"
#include "data/batch.h"
#include "data/masking.h"
#include "data/text_stream.h"

using namespace normlab;
using namespace normlab::data;

namespace {

constexpr int64_t kVocab = 1000;                       // ordinary tokens [4, 999), <mask> = 999
const MaskTokens kTokens{kVocab - 1, kNumSpecialTokens, kVocab - 1};

// Blocks <s> t_1..t_{n-1} of ordinary tokens, lengths `lengths` (padded in the batch).
std::vector<Sentence> blocks(const std::vector<int64_t>& lengths) {
  std::vector<Sentence> out;
  int64_t next = kNumSpecialTokens;
  for (auto n : lengths) {
    Sentence b{kBos};
    for (int64_t j = 1; j < n; ++j) {
      b.push_back(next);
      next = next + 1 < kVocab - 1 ? next + 1 : kNumSpecialTokens;
    }
    out.push_back(b);
  }
  return out;
}

Batch masked(const std::vector<Sentence>& b, const std::vector<int64_t>& indices, const MaskingConfig& c,
             uint64_t seed, int64_t epoch) {
  std::vector<Sentence> none(b.size());
  auto batch = gather_batch(b, none, indices, Layout::kMaskedBlocks);
  mask_batch(batch, indices, c, kTokens, seed, epoch);
  return batch;
}

}  // namespace

TEST(Masking, ChosenCountIsFloorOfPnPlusUniformAndNeverBosOrPadding) {
  const auto b = blocks({21, 9, 2, 40});
  const std::vector<int64_t> all{0, 1, 2, 3};
  const auto original = gather_batch(b, std::vector<Sentence>(4), all, Layout::kMaskedBlocks).src;
  MaskingConfig c;
  for (int64_t epoch = 0; epoch < 200; ++epoch) {
    const auto batch = masked(b, all, c, 7, epoch);
    for (int64_t r = 0; r < 4; ++r) {
      const auto n = static_cast<double>(b[static_cast<size_t>(r)].size() - 1);  // candidates: all but <s>
      const auto chosen = batch.target[r].ne(kPad).sum().item<int64_t>();
      // floor(0.15 n + u), u in [0, 1): floor(0.15 n) or one more; at least one.
      EXPECT_GE(chosen, std::max<int64_t>(1, static_cast<int64_t>(std::floor(0.15 * n))));
      EXPECT_LE(chosen, std::max<int64_t>(1, static_cast<int64_t>(std::floor(0.15 * n)) + 1));
      EXPECT_EQ(batch.target[r][0].item<int64_t>(), kPad) << "<s> chosen";
      EXPECT_EQ(batch.src[r][0].item<int64_t>(), kBos);
    }
    // Padding stays padding and is never a target.
    EXPECT_TRUE(batch.src.eq(kPad).equal(original.eq(kPad)));
    EXPECT_EQ(batch.target_tokens, batch.target.ne(kPad).sum().item<int64_t>());
  }
}

TEST(Masking, TargetsHoldTheOriginalTokensAndTheSplitIsBinomial) {
  const auto b = blocks(std::vector<int64_t>(64, 101));  // 100 candidates each: 15 chosen, never 16
  std::vector<int64_t> indices(64);
  std::iota(indices.begin(), indices.end(), 0);
  const auto original = gather_batch(b, std::vector<Sentence>(64), indices, Layout::kMaskedBlocks).src;
  MaskingConfig c;
  int64_t chosen = 0, masked_count = 0, kept = 0, replaced = 0;
  for (int64_t epoch = 1; epoch <= 50; ++epoch) {
    const auto batch = masked(b, indices, c, 3, epoch);
    const auto at = batch.target.ne(kPad);
    EXPECT_TRUE(batch.target.masked_select(at).equal(original.masked_select(at)));
    // Positions not chosen are untouched.
    EXPECT_TRUE(batch.src.masked_select(at.logical_not()).equal(original.masked_select(at.logical_not())));
    chosen += at.sum().item<int64_t>();
    masked_count += batch.src.eq(kTokens.mask).logical_and(at).sum().item<int64_t>();
    kept += batch.src.eq(original).logical_and(at).sum().item<int64_t>();
    const auto ordinary = batch.src.ge(kTokens.first_random).logical_and(batch.src.lt(kTokens.end_random));
    replaced += batch.src.ne(original).logical_and(at).logical_and(ordinary).sum().item<int64_t>();
  }
  EXPECT_EQ(chosen, 50 * 64 * 15);
  const auto n = static_cast<double>(chosen);
  // A replacement equal to the original counts as kept: probability 0.1 / 995 each.
  const double p_mask = 0.8, p_kept = 0.1 + 0.1 / 995.0, p_replaced = 0.1 - 0.1 / 995.0;
  for (auto [count, p] : {std::pair{masked_count, p_mask}, std::pair{kept, p_kept}, std::pair{replaced, p_replaced}}) {
    const double sigma = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(static_cast<double>(count), n * p, 5 * sigma) << "expected share " << p;
  }
  EXPECT_EQ(masked_count + kept + replaced, chosen);
}

TEST(Masking, MasksDependOnSeedEpochAndExampleOnly) {
  const auto b = blocks({30, 30, 30, 30});
  MaskingConfig c;
  const auto together = masked(b, {0, 1, 2, 3}, c, 11, 2);
  const auto alone = masked(b, {2}, c, 11, 2);
  EXPECT_TRUE(together.src[2].equal(alone.src[0]));  // batching does not matter
  EXPECT_TRUE(together.target[2].equal(alone.target[0]));
  const auto reordered = masked(b, {3, 2, 1, 0}, c, 11, 2);
  EXPECT_TRUE(reordered.src[1].equal(together.src[2]));
  EXPECT_FALSE(masked(b, {0, 1, 2, 3}, c, 11, 3).target.equal(together.target));  // a new epoch, new masks
  EXPECT_FALSE(masked(b, {0, 1, 2, 3}, c, 12, 2).target.equal(together.target));  // a new seed
  EXPECT_TRUE(masked(b, {0, 1, 2, 3}, c, 11, 2).src.equal(together.src));        // deterministic
}

TEST(Masking, ProblemsNameTheOption) {
  MaskingConfig c;
  EXPECT_TRUE(c.problems().empty());
  c.mask_prob = 1.5;
  ASSERT_FALSE(c.problems().empty());
  EXPECT_NE(c.problems()[0].find("--mask-prob"), std::string::npos);
  c = {};
  c.leave_unmasked_prob = 0.6;
  c.random_token_prob = 0.6;
  ASSERT_EQ(c.problems().size(), 1u);
  EXPECT_NE(c.problems()[0].find("at most 1"), std::string::npos);
}

TEST(MaskedBlocks, EveryTokenOnceAfterBos) {
  TextStream stream;
  stream.path = "t.txt";
  for (int64_t i = 0; i < 23; ++i) stream.tokens.push_back(10 + i);
  const auto b = cut_masked_blocks(stream, 6);  // 5 tokens each: 4 blocks, 3 tokens left out
  ASSERT_EQ(b.size(), 4u);
  for (size_t i = 0; i < b.size(); ++i) {
    ASSERT_EQ(b[i].size(), 6u);
    EXPECT_EQ(b[i][0], kBos);
    for (size_t j = 1; j < 6; ++j) EXPECT_EQ(b[i][j], 10 + static_cast<int64_t>(i * 5 + j - 1));
  }
  EXPECT_THROW(cut_masked_blocks(stream, 1), std::invalid_argument);
  EXPECT_THROW(cut_masked_blocks(stream, 30), std::invalid_argument);
}
