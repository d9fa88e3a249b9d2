// The joint BPE vocabulary: fairseq's special ids, deterministic training, exact round trips
// on real sentences, and bad models rejected by name.
#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>

#include "core/file_io.h"
#include "core/tokens.h"
#include "data/corpus.h"
#include "data/vocab.h"
#include "test_data.h"

using namespace normlab;
using namespace normlab::data;
using normlab::testing::ScratchDir;

namespace {

// Multi30k val, both languages (2028 sentences): a model trains on it in well under a second.
std::vector<std::string> val_sentences(const std::string& de_path) {
  const auto prefix = de_path.substr(0, de_path.size() - std::string(".de.gz").size());
  const auto text = read_parallel(prefix, "de", "en");
  auto all = text.src;
  all.insert(all.end(), text.tgt.begin(), text.tgt.end());
  return all;
}

VocabTrainOptions small(int64_t size) {
  VocabTrainOptions o;
  o.vocab_size = size;
  return o;
}

}  // namespace

TEST(Vocab, SpecialIdsAreFairseqsAndTrainingIsDeterministic) {
  NORMLAB_REQUIRE_SHARED_DATA(de, "multi30k/val.de.gz");
  const auto sentences = val_sentences(de);
  const auto a = train_vocab(sentences, small(1000));
  const auto b = train_vocab(sentences, small(1000));
  EXPECT_EQ(a, b) << "training twice gave different models";
  const auto vocab = Vocab::from_bytes(a, "model");
  EXPECT_EQ(vocab.size(), 1000);
  EXPECT_EQ(vocab.piece(kBos), "<s>");
  EXPECT_EQ(vocab.piece(kPad), "<pad>");
  EXPECT_EQ(vocab.piece(kEos), "</s>");
  EXPECT_EQ(vocab.piece(kUnk), "<unk>");
  EXPECT_EQ(vocab.id("<pad>"), kPad);
  EXPECT_EQ(vocab.id("no such piece"), kUnk);
  EXPECT_NE(train_vocab(sentences, small(1200)), a);
}

TEST(Vocab, RoundTripOnRealSentences) {
  NORMLAB_REQUIRE_SHARED_DATA(de, "multi30k/val.de.gz");
  const auto vocab = Vocab::from_bytes(train_vocab(val_sentences(de), small(1000)), "model");
  const auto text = read_text_lines(de);
  ASSERT_EQ(text.size(), 1014u);
  int64_t tokens = 0;
  for (const auto& s : text) {
    const auto ids = vocab.encode(s);
    tokens += static_cast<int64_t>(ids.size());
    // No special token is added, none appears: every id is an ordinary piece.
    ASSERT_TRUE(std::all_of(ids.begin(), ids.end(), [](int64_t id) { return id >= kNumSpecialTokens; })) << s;
    ASSERT_EQ(vocab.decode(ids), s);
    ASSERT_EQ(vocab.decode_pieces(vocab.encode_pieces(s)), s);
  }
  EXPECT_GT(tokens, 10000);  // 1014 sentences of ~12 words: pieces, not whole lines
  // Special ids are skipped when decoding, as the trainer's and beam search's outputs have them.
  auto ids = vocab.encode(text[0]);
  auto with_specials = ids;
  with_specials.insert(with_specials.begin(), kEos);
  with_specials.insert(with_specials.end(), {kEos, kPad, kPad, kBos});
  EXPECT_EQ(vocab.decode(with_specials), text[0]);
  EXPECT_THROW(vocab.decode({5, vocab.size()}), std::invalid_argument);
  EXPECT_THROW(vocab.decode({-1}), std::invalid_argument);
}

TEST(Vocab, UnseenCharactersBecomeUnk) {
  NORMLAB_REQUIRE_SHARED_DATA(de, "multi30k/val.de.gz");
  const auto vocab = Vocab::from_bytes(train_vocab(val_sentences(de), small(1000)), "model");
  const auto ids = vocab.encode("Ein Mann \xE2\x98\x83 l\xC3\xA4uft.");  // a snowman, not in Multi30k
  EXPECT_EQ(std::count(ids.begin(), ids.end(), kUnk), 1);
  EXPECT_NE(vocab.decode(ids).find("\xE2\x81\x87"), std::string::npos);  // " ⁇ "
}

TEST(Vocab, SaveLoadAndBadModels) {
  NORMLAB_REQUIRE_SHARED_DATA(de, "multi30k/val.de.gz");
  ScratchDir dir("vocab_files");
  const auto bytes = train_vocab(val_sentences(de), small(600));
  const auto path = save_vocab(bytes, dir / "sub/dir");
  EXPECT_EQ(path, dir / "sub/dir/spm.model");
  const auto loaded = Vocab::load(path);
  EXPECT_EQ(loaded.bytes(), bytes);
  EXPECT_EQ(loaded.size(), 600);
  const auto list = core::read_file(dir / "sub/dir/spm.vocab");
  EXPECT_EQ(std::count(list.begin(), list.end(), '\n'), 600);
  EXPECT_EQ(std::string(list.begin(), list.begin() + 6), "<s>\t0\n");

  normlab::testing::write_text(dir / "garbage.model", "this is not a protobuf \x01\x02\x03");
  for (const auto& bad : {dir / "garbage.model", dir / "missing.model"}) {
    try {
      Vocab::load(bad);
      ADD_FAILURE() << bad;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(Vocab, BadOptionsAndImpossibleSizes) {
  EXPECT_THROW(train_vocab({"a b c"}, small(4)), std::invalid_argument);
  VocabTrainOptions o;
  o.character_coverage = 0;
  EXPECT_THROW(train_vocab({"a b c"}, o), std::invalid_argument);
  EXPECT_THROW(train_vocab({"", ""}, small(100)), std::invalid_argument);
  // Fewer pieces than the text has characters: SentencePiece refuses, we say so.
  EXPECT_THROW(train_vocab({"abcdefghijklmnopqrstuvwxyz"}, small(10)), std::runtime_error);
}
