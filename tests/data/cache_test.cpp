// The encoded-corpus cache: hits, a key that follows every input, and any damage detected.
#include <cstdio>
#include <filesystem>

#include <gtest/gtest.h>

#include "core/file_io.h"
#include "data/cache.h"
#include "data/vocab.h"
#include "test_data.h"

using namespace normlab;
using namespace normlab::data;
using normlab::testing::ScratchDir;
using normlab::testing::write_gzip;
using normlab::testing::write_text;

namespace {

EncodedCorpus tiny_corpus() { return {{{5, 6, 7}, {}, {8}}, {{9}, {10, 11}, {70000, 4}}}; }

// A vocabulary trained on the little corpus below; it has every character of it.
std::string tiny_model() {
  static const std::string model = [] {
    VocabTrainOptions o;
    o.vocab_size = 60;
    return train_vocab({"ein Mann liest", "eine Frau spielt", "a man reads", "a woman plays"}, o);
  }();
  return model;
}

void write_corpus(const ScratchDir& dir) {
  write_gzip(dir / "c.de.gz", "ein Mann liest\neine Frau spielt\n");
  write_text(dir / "c.en", "a man reads\na woman plays\n");
}

}  // namespace

TEST(Cache, SaveLoadRoundTripAndWrongKey) {
  ScratchDir dir("cache_roundtrip");
  const auto path = cache_file_path(dir.str(), "c.de-en", 0x0123456789abcdefULL);
  EXPECT_EQ(path, dir / "c.de-en.0123456789abcdef.bin");
  save_encoded(path, 0x0123456789abcdefULL, tiny_corpus());
  std::string why;
  const auto back = load_encoded(path, 0x0123456789abcdefULL, &why);
  ASSERT_TRUE(back.has_value()) << why;
  EXPECT_EQ(back->src, tiny_corpus().src);
  EXPECT_EQ(back->tgt, tiny_corpus().tgt);
  EXPECT_FALSE(load_encoded(path, 42, &why).has_value());
  EXPECT_NE(why.find("key"), std::string::npos);
  EXPECT_FALSE(load_encoded(dir / "none.bin", 42, &why).has_value());
}

TEST(Cache, EveryFlippedByteAndEveryTruncationIsDetected) {
  ScratchDir dir("cache_corrupt");
  const auto path = dir / "c.bin";
  const uint64_t key = 7;
  save_encoded(path, key, tiny_corpus());
  const auto good = core::read_file(path);
  std::string why;
  for (size_t i = 0; i < good.size(); ++i) {
    auto bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    core::write_file_atomic(path, bad);
    ASSERT_FALSE(load_encoded(path, key, &why).has_value()) << "flip at byte " << i;
  }
  for (size_t n = 0; n < good.size(); ++n) {
    core::write_file_atomic(path, std::vector<char>(good.begin(), good.begin() + static_cast<long>(n)));
    ASSERT_FALSE(load_encoded(path, key, &why).has_value()) << "truncated to " << n;
  }
  auto longer = good;
  longer.push_back('x');
  core::write_file_atomic(path, longer);
  EXPECT_FALSE(load_encoded(path, key, &why).has_value());
}

TEST(Cache, HitThenMissWhenAnInputChanges) {
  ScratchDir dir("cache_key");
  write_corpus(dir);
  const auto vocab = Vocab::from_bytes(tiny_model(), "tiny");
  const auto cache = dir / "cache";

  const auto first = load_encoded_corpus(dir / "c", "de", "en", vocab, cache);
  EXPECT_FALSE(first.from_cache);
  ASSERT_TRUE(std::filesystem::exists(first.cache_file)) << first.message;
  EXPECT_EQ(first.corpus.src, encode_all(vocab, {"ein Mann liest", "eine Frau spielt"}));
  const auto second = load_encoded_corpus(dir / "c", "de", "en", vocab, cache);
  EXPECT_TRUE(second.from_cache) << second.message;
  EXPECT_EQ(second.cache_file, first.cache_file);
  EXPECT_EQ(second.corpus.src, first.corpus.src);
  EXPECT_EQ(second.corpus.tgt, first.corpus.tgt);

  // The key follows the content of each input and of the model, and the direction.
  const auto key = corpus_cache_key({dir / "c.de.gz", dir / "c.en"}, vocab.bytes());
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key));
  EXPECT_EQ(first.cache_file, dir / ("cache/c.de-en." + std::string(hex) + ".bin"));
  EXPECT_NE(corpus_cache_key({dir / "c.en", dir / "c.de.gz"}, vocab.bytes()), key);
  EXPECT_NE(corpus_cache_key({dir / "c.de.gz", dir / "c.en"}, vocab.bytes() + " "), key);
  write_text(dir / "c.en", "a man reads\na woman play\n");
  EXPECT_NE(corpus_cache_key({dir / "c.de.gz", dir / "c.en"}, vocab.bytes()), key);
  const auto changed = load_encoded_corpus(dir / "c", "de", "en", vocab, cache);
  EXPECT_FALSE(changed.from_cache);
  EXPECT_NE(changed.cache_file, first.cache_file);
  EXPECT_NE(changed.corpus.tgt, first.corpus.tgt);
}

TEST(Cache, CorruptedCacheIsIgnoredWithAMessageAndRewritten) {
  ScratchDir dir("cache_ignore");
  write_corpus(dir);
  const auto vocab = Vocab::from_bytes(tiny_model(), "tiny");
  const auto first = load_encoded_corpus(dir / "c", "de", "en", vocab, dir / "cache");
  auto bytes = core::read_file(first.cache_file);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 1);
  core::write_file_atomic(first.cache_file, bytes);
  const auto again = load_encoded_corpus(dir / "c", "de", "en", vocab, dir / "cache");
  EXPECT_FALSE(again.from_cache);
  EXPECT_NE(again.message.find("ignored cache " + first.cache_file), std::string::npos) << again.message;
  EXPECT_NE(again.message.find("checksum"), std::string::npos) << again.message;
  EXPECT_EQ(again.corpus.src, first.corpus.src);
  EXPECT_TRUE(load_encoded_corpus(dir / "c", "de", "en", vocab, dir / "cache").from_cache);
}

TEST(Cache, NoCacheFolderMeansNoFile) {
  ScratchDir dir("cache_none");
  write_corpus(dir);
  const auto vocab = Vocab::from_bytes(tiny_model(), "tiny");
  const auto loaded = load_encoded_corpus(dir / "c", "de", "en", vocab, "");
  EXPECT_TRUE(loaded.cache_file.empty());
  EXPECT_EQ(loaded.corpus.tgt.size(), 2u);
}
