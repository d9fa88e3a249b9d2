// The classification TSV (data/classification.h): files written by hand read as written, a
// write -> read round trip, and every malformed case refused with a message naming FILE:LINE.
#include "data/classification.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <gtest/gtest.h>

#include "test_data.h"

namespace normlab::data {
namespace {

using testing::slurp;

// The message of read_classification_file(path), or "" when it reads.
std::string read_error(const std::string& path) {
  try {
    read_classification_file(path);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Classification, ReadsFilesWrittenByHand) {
  testing::ScratchDir dir("classification_read");
  // DOS line ends, a last line without "\n", UTF-8 text, spaces kept as written.
  testing::write_text(dir / "pairs.tsv",
                      "1\tTo be, or not\tthat is the question\r\n0\tSo f\xc3\xa4r\t  two  spaces\r\n2\ta\tb");
  const auto pairs = read_classification_file(dir / "pairs.tsv");
  ASSERT_EQ(pairs.size(), 3u);
  EXPECT_EQ(pairs[0].label, 1);
  EXPECT_EQ(pairs[0].a, "To be, or not");
  EXPECT_EQ(pairs[0].b, "that is the question");
  EXPECT_EQ(pairs[1].label, 0);
  EXPECT_EQ(pairs[1].a, "So f\xc3\xa4r");
  EXPECT_EQ(pairs[1].b, "  two  spaces");
  EXPECT_EQ(pairs[2].label, 2);
  EXPECT_EQ(pairs[2].b, "b");
  for (size_t i = 0; i < pairs.size(); ++i) EXPECT_EQ(pairs[i].line, static_cast<int64_t>(i) + 1);

  testing::write_text(dir / "single.tsv", "0\tone sentence\n9223372036854775807\tthe largest label\n");
  const auto single = read_classification_file(dir / "single.tsv");
  ASSERT_EQ(single.size(), 2u);
  EXPECT_EQ(single[0].a, "one sentence");
  EXPECT_TRUE(single[0].b.empty());
  EXPECT_EQ(single[1].label, INT64_MAX);
}

TEST(Classification, WriteThenReadGivesTheExamplesBack) {
  testing::ScratchDir dir("classification_round_trip");
  std::vector<ClassificationExample> pairs;
  for (int i = 0; i < 5; ++i)
    pairs.push_back({i % 3, "first " + std::to_string(i), "caf\xc3\xa9 " + std::to_string(i), 0});
  write_classification_file(dir / "p.tsv", pairs);
  EXPECT_EQ(slurp(dir / "p.tsv").rfind("0\tfirst 0\tcaf\xc3\xa9 0\n1\tfirst 1\tcaf\xc3\xa9 1\n2\t", 0), 0u);
  const auto back = read_classification_file(dir / "p.tsv");
  ASSERT_EQ(back.size(), pairs.size());
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].label, pairs[i].label);
    EXPECT_EQ(back[i].a, pairs[i].a);
    EXPECT_EQ(back[i].b, pairs[i].b);
    EXPECT_EQ(back[i].line, static_cast<int64_t>(i) + 1);
  }
  const std::vector<ClassificationExample> single = {{1, "only a", "", 0}, {0, "another", "", 0}};
  write_classification_file(dir / "s.tsv", single);
  EXPECT_EQ(slurp(dir / "s.tsv"), "1\tonly a\n0\tanother\n");
  EXPECT_EQ(read_classification_file(dir / "s.tsv").size(), 2u);
}

TEST(Classification, MalformedLinesAreNamedByFileAndLine) {
  testing::ScratchDir dir("classification_bad");
  struct Case {
    const char* text;
    int line;
    const char* what;
  };
  const Case cases[] = {
      {"1\tok\n\n0\tfine\n", 2, "blank line"},
      {"1\tok\r\n\r\n", 2, "blank line"},
      {"1\tok\nno tab here\n", 2, "no label"},
      {"\tno label\n", 1, "empty label"},
      {"x\ttext\n", 1, "not a non-negative integer"},
      {"-1\ttext\n", 1, "not a non-negative integer"},
      {"+1\ttext\n", 1, "not a non-negative integer"},
      {" 1\ttext\n", 1, "not a non-negative integer"},
      {"0\tok\n9223372036854775808\ttext\n", 2, "out of range"},
      {"1\ta\tb\tc\n", 1, "4 fields"},
      {"1\t\n", 1, "empty text"},
      {"1\ta\t\n", 1, "empty text"},
      {"1\ta\n0\tb\n1\tc\xff\n", 3, "invalid UTF-8"},
      {"1\tcut \xc3\n", 1, "invalid UTF-8"},
      {"1\ta\tb\n0\tc\n", 2, "2 fields but line 1 has 3"},
      {"1\ta\n0\tc\n1\tc\td\n", 3, "3 fields but line 1 has 2"},
  };
  int n = 0;
  for (const auto& c : cases) {
    const auto path = dir / ("bad" + std::to_string(n++) + ".tsv");
    testing::write_text(path, c.text);
    const auto message = read_error(path);
    const auto where = path + ":" + std::to_string(c.line) + ": ";
    EXPECT_EQ(message.rfind(where, 0), 0u) << "expected " << where << " for " << c.text << "; got: " << message;
    EXPECT_NE(message.find(c.what), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
  }
  EXPECT_EQ(read_error(dir / "absent.tsv"), dir / "absent.tsv: cannot read (No such file or directory)");
  EXPECT_EQ(read_error(dir.str()), dir.str() + ": cannot read (a folder)");
  testing::write_text(dir / "empty.tsv", "");
  EXPECT_EQ(read_error(dir / "empty.tsv"), dir / "empty.tsv: no examples");
}

TEST(Classification, WriteRefusesWhatCouldNotBeReadBack) {
  testing::ScratchDir dir("classification_write_bad");
  const auto refused = [&](const std::vector<ClassificationExample>& examples, const std::string& what) {
    const auto path = dir / "out.tsv";
    try {
      write_classification_file(path, examples);
      ADD_FAILURE() << "no error for " << what;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(path)) << what;
  };
  refused({{1, "a\tb", "", 0}}, "example 1: text A holds a TAB");
  refused({{1, "a", "b", 0}, {0, "c", "d\ne", 0}}, "example 2: text B holds a TAB or a line break");
  refused({{1, "a\r", "", 0}}, "line break");
  refused({{1, "", "", 0}}, "text A is empty");
  refused({{1, "a", "b", 0}, {0, "c", "", 0}}, "example 2: text B is empty");
  refused({{1, "a", "", 0}, {0, "c", "d", 0}}, "example 2: a pair, but example 1 is a single sentence");
  refused({{-1, "a", "", 0}}, "label -1 is negative");
  refused({{0, "bad \xff", "", 0}}, "invalid UTF-8");
  refused({}, "no examples");
}

}  // namespace
}  // namespace normlab::data
