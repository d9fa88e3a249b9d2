// Reading parallel text: gzip and plain alike, white space normalised, bad input named by
// file and line; filters by hand-counted lengths.
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "data/corpus.h"
#include "test_data.h"

using namespace normlab::data;
using normlab::testing::ScratchDir;
using normlab::testing::write_gzip;
using normlab::testing::write_text;

namespace {

// Throws std::runtime_error whose message contains every one of `parts`.
template <typename F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

// Raw lines with the data's quirks (README: U+00A0, trailing white space, a TAB) and their
// normalised forms, written by hand.
const std::string kRawDe =
    "Ein Mann\xC2\xA0l\xC3\xA4uft.  \n"               // U+00A0 inside, trailing spaces
    "  Zwei  Hunde\tspielen\t\tim Schnee.\n"          // leading spaces, TABs, double space
    "Eine Frau\xE3\x80\x80liest\xE2\x80\xAF" "ein Buch.\r\n"  // U+3000, U+202F, CRLF
    "\xE2\x96\x81Kein \xC2\xA9 Leerzeichen.\n";      // U+2581 and U+00A9 are not spaces
const std::vector<std::string> kNormDe = {
    "Ein Mann l\xC3\xA4uft.", "Zwei Hunde spielen im Schnee.", "Eine Frau liest ein Buch.",
    "\xE2\x96\x81Kein \xC2\xA9 Leerzeichen."};
const std::string kRawEn = "A man runs.\nTwo dogs play in the snow.\nA woman reads a book.\nNo spaces.";

}  // namespace

TEST(Corpus, NormalizeWhitespace) {
  NormalizationStats stats;
  EXPECT_EQ(normalize_whitespace(" \t a\xC2\xA0\xC2\xA0 b \xE1\x9A\x80 c\xE2\x80\x8A\xE2\x81\x9F" "d \x0B\x0C", &stats),
            "a b c d");
  EXPECT_EQ(normalize_whitespace(""), "");
  EXPECT_EQ(normalize_whitespace(" \t\xC2\xA0 "), "");
  EXPECT_EQ(normalize_whitespace("a\xE2\x80\x8B" "b"), "a\xE2\x80\x8B" "b");  // U+200B is not Zs
  EXPECT_EQ(stats.lines_changed, 1);
  EXPECT_EQ(stats.with_tab, 1);
  EXPECT_EQ(stats.with_unicode_space, 1);
  EXPECT_EQ(stats.trimmed, 1);
}

TEST(Corpus, Utf8Validation) {
  EXPECT_EQ(utf8_problem("Gr\xC3\xBC\xC3\x9F" "e \xF0\x9F\x98\x80 \xE2\x82\xAC"), "");
  EXPECT_NE(utf8_problem("a\xC3\x28").find("byte 2"), std::string::npos);  // bad continuation
  EXPECT_NE(utf8_problem("\xC0\xAF"), "");              // overlong '/'
  EXPECT_NE(utf8_problem("\xE0\x80\xAF"), "");          // overlong, 3 bytes
  EXPECT_NE(utf8_problem("\xED\xA0\x80"), "");          // surrogate U+D800
  EXPECT_NE(utf8_problem("\xF4\x90\x80\x80"), "");      // above U+10FFFF
  EXPECT_NE(utf8_problem("ab\xE2\x82").find("truncated"), std::string::npos);
  EXPECT_NE(utf8_problem(std::string("a\0b", 3)).find("NUL"), std::string::npos);
  EXPECT_NE(utf8_problem("\xFF"), "");
}

TEST(Corpus, GzipAndPlainReadAlikeAndNormalised) {
  ScratchDir dir("corpus_read");
  write_gzip(dir / "gz.de.gz", kRawDe);
  write_gzip(dir / "gz.en.gz", kRawEn);
  write_text(dir / "plain.de", kRawDe);
  write_text(dir / "plain.en", kRawEn);
  const auto gz = read_parallel(dir / "gz", "de", "en");
  const auto plain = read_parallel(dir / "plain", "de", "en");
  EXPECT_EQ(gz.src_path, dir / "gz.de.gz");
  EXPECT_EQ(plain.src_path, dir / "plain.de");
  EXPECT_EQ(gz.src, kNormDe);
  EXPECT_EQ(plain.src, kNormDe);
  EXPECT_EQ(gz.tgt, plain.tgt);
  ASSERT_EQ(gz.tgt.size(), 4u);  // the last line has no newline
  EXPECT_EQ(gz.tgt[3], "No spaces.");
  EXPECT_EQ(gz.src_stats.lines_changed, 3);
  EXPECT_EQ(gz.src_stats.with_tab, 1);
  EXPECT_EQ(gz.src_stats.with_unicode_space, 2);
  EXPECT_EQ(gz.src_stats.trimmed, 3);
  EXPECT_EQ(gz.tgt_stats.lines_changed, 0);

  const auto first_two = read_parallel(dir / "gz", "de", "en", {2});
  EXPECT_EQ(first_two.src.size(), 2u);
  EXPECT_EQ(first_two.tgt[1], "Two dogs play in the snow.");
}

TEST(Corpus, InvalidUtf8NamesFileAndLine) {
  ScratchDir dir("corpus_utf8");
  write_gzip(dir / "x.de.gz", "gut\nauch gut\nschlecht \xC3\x28 hier\n");
  write_text(dir / "x.en", "good\nalso good\nbad here\n");
  expect_error([&] { read_parallel(dir / "x", "de", "en"); },
               {dir / "x.de.gz:3:", "invalid UTF-8 at byte 10", "0xC3 0x28"});
}

TEST(Corpus, MismatchedLineCountsNameBothFiles) {
  ScratchDir dir("corpus_counts");
  write_text(dir / "x.de", "a\nb\nc\n");
  write_gzip(dir / "x.en.gz", "a\nb\n");
  expect_error([&] { read_parallel(dir / "x", "de", "en"); },
               {dir / "x.de has 3 lines", dir / "x.en.gz has 2"});
}

TEST(Corpus, MissingAmbiguousAndCorruptFiles) {
  ScratchDir dir("corpus_files");
  write_text(dir / "x.de", "a\n");
  expect_error([&] { read_parallel(dir / "x", "de", "en"); }, {"cannot find " + dir / "x.en", dir / "x.en.gz"});
  write_text(dir / "x.en", "a\n");
  write_gzip(dir / "x.en.gz", "a\n");
  expect_error([&] { read_parallel(dir / "x", "de", "en"); }, {"both", dir / "x.en.gz"});
  // A .gz cut in the middle: zlib notices the missing end, nothing is silently lost.
  std::string many;
  for (int i = 0; i < 20000; ++i) many += "line " + std::to_string(i * 7919 % 100003) + "\n";
  write_gzip(dir / "t.de.gz", many);
  std::ifstream in(dir / "t.de.gz", std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write_text(dir / "t.de.gz", gz.substr(0, gz.size() / 2));
  expect_error([&] { read_text_lines(dir / "t.de.gz"); }, {"cannot read " + dir / "t.de.gz"});
  expect_error([&] { read_text_lines(dir / "nothing.de"); }, {"cannot read " + dir / "nothing.de"});
}

TEST(Corpus, RealMulti30kQuirksAsTheDataReadmeCountsThem) {
  NORMLAB_REQUIRE_SHARED_DATA(de, "multi30k/train.de.gz");
  const auto prefix = de.substr(0, de.size() - std::string(".de.gz").size());
  const auto text = read_parallel(prefix, "de", "en");
  ASSERT_EQ(text.src.size(), 29000u);
  ASSERT_EQ(text.tgt.size(), 29000u);
  // shared/data/README.md: 40 lines with trailing white space, 44 with U+00A0, 1 with a TAB.
  EXPECT_EQ(text.src_stats.with_unicode_space, 44);
  EXPECT_EQ(text.src_stats.with_tab, 1);
  EXPECT_EQ(text.src_stats.trimmed, 40);
  // Lines that Python's ' '.join(line.split()) changes (also runs of two spaces): 129 and 1.
  EXPECT_EQ(text.src_stats.lines_changed, 129);
  EXPECT_EQ(text.tgt_stats.lines_changed, 1);
  EXPECT_EQ(text.tgt[23647], "A man in a suit jacket with a free word sign.");
  for (const auto& s : text.src) ASSERT_EQ(normalize_whitespace(s), s);
}

TEST(Corpus, FilterCountsEachReasonAndNeverTruncates) {
  const std::vector<Sentence> src = {{5, 6}, {}, {5, 6, 7, 8}, {5}, {5, 6, 7}, {5, 6, 7}};
  const std::vector<Sentence> tgt = {{5}, {5}, {5, 6}, {5, 6, 7, 8, 9}, {5, 6, 7}, {}};
  FilterOptions options;
  options.max_positions = 5;  // 4 tokens + </s> fit, 5 do not
  options.max_length_ratio = 3;
  const auto r = filter_pairs(src, tgt, options);
  EXPECT_EQ(r.kept, (std::vector<int64_t>{0, 2, 4}));  // 4:2 is ratio 2; 1:5 has 6 > 5 positions
  EXPECT_EQ(r.empty, 2);
  EXPECT_EQ(r.too_long, 1);
  EXPECT_EQ(r.bad_ratio, 0);
  options.max_length_ratio = 1.5;
  const auto strict = filter_pairs(src, tgt, options);
  EXPECT_EQ(strict.kept, (std::vector<int64_t>{4}));
  EXPECT_EQ(strict.bad_ratio, 2);
  options.max_positions = 1;
  options.max_length_ratio = 0.5;
  try {
    filter_pairs(src, tgt, options);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--max-positions"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("--max-length-ratio"), std::string::npos);
  }
}
