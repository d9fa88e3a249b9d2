// The decoder-only kind (model/decoder_only.h) and its data (data/text_stream.h): causal masking
// checked by gradients and by perturbation for every scheme, and the blocks of a text stream
// against their definition.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <fstream>
#include <string>

#include "core/tokens.h"
#include "data/batch.h"
#include "data/batching.h"
#include "data/text_stream.h"
#include "model/decoder_only.h"
#include "model/model.h"
#include "tiny_model.h"

namespace normlab {
namespace {

model::ModelConfig decoder_only_config(const std::string& scheme) {
  auto c = test::tiny_config(scheme);
  c.kind = model::kDecoderOnly;
  c.encoder_layers = 0;
  c.decoder_layers = 3;
  c.dropout = 0.0;
  c.share = model::SharedEmbeddings::kNone;  // the input table's gradient shows what the loss read
  return c;
}

// Tokens 4..4+T-1: each position has its own id, so that a table row belongs to one position.
torch::Tensor distinct_tokens(int64_t length) { return torch::arange(4, 4 + length, torch::kInt64).unsqueeze(0); }

class DecoderOnlyCausal : public ::testing::TestWithParam<std::string> {};

// The loss at position t has zero gradient with respect to the token table's rows of the tokens
// after t (each id appears at one position only), and nonzero for those at or before t.
TEST_P(DecoderOnlyCausal, TheLossAtTSeesNoTokenAfterT) {
  auto net = model::DecoderOnly(decoder_only_config(GetParam()));
  model::initialize(net, 5);
  net->to(torch::kFloat64);
  const int64_t T = 7, t = 3;
  const auto tokens = distinct_tokens(T);
  const auto logits = net->forward(tokens);
  logits.index({0, t}).logsumexp(0).backward();
  const auto grad = net->decoder->embed_tokens->weight.grad();
  for (int64_t s = 0; s < T; ++s) {
    const double g = grad[4 + s].norm().item<double>();
    if (s > t)
      EXPECT_EQ(g, 0.0) << "position " << s << " after " << t;
    else
      EXPECT_GT(g, 0.0) << "position " << s << " at or before " << t;
  }
}

// Changing the tokens after t leaves the logits at 0..t bit for bit, and changes those after.
TEST_P(DecoderOnlyCausal, ChangingLaterTokensLeavesEarlierLogits) {
  auto net = model::DecoderOnly(decoder_only_config(GetParam()));
  model::initialize(net, 6);
  net->eval();
  const int64_t T = 8, t = 4;
  const auto a = distinct_tokens(T);
  auto b = a.clone();
  b.index_put_({0, torch::indexing::Slice(t + 1)}, 20);
  torch::NoGradGuard no_grad;
  const auto la = net->forward(a), lb = net->forward(b);
  const auto early = torch::indexing::Slice(0, t + 1), late = torch::indexing::Slice(t + 1);
  EXPECT_TRUE(torch::equal(la.index({0, early}), lb.index({0, early})));
  EXPECT_FALSE(torch::allclose(la.index({0, late}), lb.index({0, late})));
}

// A prompt fed in one pass (DecoderImpl::prefill, generate's) leaves the cache that steps
// read as if it had come one position at a time: every later step's logits equal the full
// forward pass over the prefix, also after rows are reordered (beams taking over prompts).
TEST_P(DecoderOnlyCausal, PrefillThenStepsEqualTheFullForwardPass) {
  auto net = model::DecoderOnly(decoder_only_config(GetParam()));
  model::initialize(net, 7);
  net->to(torch::kFloat64);
  net->eval();
  torch::NoGradGuard no_grad;
  const int64_t T = 9, prompt = 5;
  const auto tokens = torch::cat({distinct_tokens(T), distinct_tokens(T).flip(1)}, 0);  // (2,T)
  const auto rows = torch::tensor(std::vector<int64_t>{1, 0, 1});
  const auto reordered = tokens.index_select(0, rows);
  auto cache = net->decoder->start_decoding(T);
  net->decoder->prefill(tokens.slice(1, 0, prompt), cache);
  EXPECT_EQ(cache.steps(), prompt);
  EXPECT_THROW(net->decoder->prefill(tokens.slice(1, 0, 1), cache), c10::Error);  // only into a fresh cache
  cache.reorder(rows, {});
  for (int64_t t = prompt; t < T; ++t) {
    const auto step = net->decoder->forward_step(reordered.slice(1, t, t + 1), cache);
    const auto full = net->forward(reordered.slice(1, 0, t + 1)).select(1, t);
    EXPECT_LT((step - full).abs().max().item<double>(), 1e-10) << "position " << t;
  }
  auto empty = net->decoder->start_decoding(T);
  net->decoder->prefill(tokens.slice(1, 0, 0), empty);  // an empty prompt feeds nothing
  EXPECT_EQ(empty.steps(), 0);
}

INSTANTIATE_TEST_SUITE_P(Schemes, DecoderOnlyCausal,
                         ::testing::Values("post-ln", "pre-ln", "t-fixup", "admin", "rezero", "deepnorm", "peri-ln",
                                           "mix-ln", "dyt", "rmsnorm-pre", "lns", "pre-ln+qk-norm"));

TEST(DecoderOnly, HasOneStackWithoutEncoderAttention) {
  auto net = model::create_model(decoder_only_config("post-ln"));
  EXPECT_EQ(net->kind(), model::kDecoderOnly);
  const auto stacks = net->stacks();
  ASSERT_EQ(stacks.size(), 1u);
  EXPECT_EQ(stacks[0].name, "decoder");
  ASSERT_EQ(stacks[0].layers.size(), 3u);
  for (const auto& layer : stacks[0].layers) {
    ASSERT_EQ(layer.blocks.size(), 2u);
    EXPECT_EQ(layer.blocks[0].first, "self_attn");
    EXPECT_EQ(layer.blocks[1].first, "ffn");
  }
  for (const auto& p : net->named_parameters()) {
    EXPECT_EQ(p.key().find("encoder"), std::string::npos) << p.key();
  }
}

TEST(DecoderOnly, RefusesAnEncoderAndASharedSourceTable) {
  auto c = decoder_only_config("post-ln");
  c.encoder_layers = 2;
  c.share = model::SharedEmbeddings::kAll;
  const auto problems = c.problems();
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("--encoder-layers"), std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("--share all"), std::string::npos) << problems[1];
}

// A stream of 0..9: blocks of N + 1 tokens at 0, N, 2N, ...; inputs and targets one apart.
TEST(TextBlocks, AreContiguousAndShareOneToken) {
  data::TextStream stream;
  stream.path = "x.txt";
  for (int64_t i = 0; i < 10; ++i) stream.tokens.push_back(100 + i);
  const auto blocks = data::cut_blocks(stream, 3);  // (10 - 1) / 3 = 3 blocks
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[0], (data::Sentence{100, 101, 102, 103}));
  EXPECT_EQ(blocks[1], (data::Sentence{103, 104, 105, 106}));
  EXPECT_EQ(blocks[2], (data::Sentence{106, 107, 108, 109}));
  const auto batch = data::gather_batch({{}, {}, {}}, blocks, {2, 0}, data::Layout::kBlocks);
  EXPECT_TRUE(torch::equal(batch.prev_output_tokens, torch::tensor({{106, 107, 108}, {100, 101, 102}})));
  EXPECT_TRUE(torch::equal(batch.target, torch::tensor({{107, 108, 109}, {101, 102, 103}})));
  EXPECT_EQ(batch.target_tokens, 6);
  EXPECT_EQ(batch.src.size(0), 2);
  EXPECT_EQ(data::example_sizes({{}, {}, {}}, blocks, data::Layout::kBlocks), (std::vector<int64_t>{3, 3, 3}));
}

TEST(TextBlocks, ATextShorterThanOneBlockIsRefusedNamingIt) {
  data::TextStream stream;
  stream.path = "short.txt";
  stream.tokens = {5, 6, 7};
  EXPECT_EQ(data::cut_blocks(stream, 2).size(), 1u);
  try {
    data::cut_blocks(stream, 3);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("short.txt: 3 tokens, fewer than --block-size 3"), std::string::npos)
        << e.what();
  }
}

TEST(TextStream, EveryLineEndsInEosAndABlankFileIsRefused) {
  const auto dir = ::testing::TempDir();
  const auto vocab_path = dir + "/text_stream_vocab";
  std::vector<std::string> lines;
  for (int i = 0; i < 200; ++i) lines.push_back("the quick brown fox " + std::to_string(i % 17) + " jumps");
  const auto vocab = data::Vocab::from_bytes(data::train_vocab(lines, {50}), "test vocab");
  const auto text = dir + "/text_stream.txt";
  std::ofstream(text) << "the fox\n\n  quick   brown\n";
  const auto stream = data::encode_text(text, vocab);
  EXPECT_EQ(stream.lines, 3);
  EXPECT_EQ(stream.blank_lines, 1);
  EXPECT_EQ(stream.lines_changed, 1);
  auto expected = vocab.encode("the fox");
  expected.push_back(kEos);
  expected.push_back(kEos);
  for (auto id : vocab.encode("quick brown")) expected.push_back(id);
  expected.push_back(kEos);
  EXPECT_EQ(stream.tokens, expected);

  const auto blank = dir + "/blank.txt";
  std::ofstream(blank) << "\n   \n";
  try {
    data::encode_text(blank, vocab);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("blank.txt: no text to model (2 lines, none with text)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace normlab
