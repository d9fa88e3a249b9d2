// The downstream tasks of data/lm_tasks.h on a small lm-data folder written by write_lm_data: every
// example checked against the documents' text by this test's own reading of it (units found by
// splitting lines and counting words here, the next unit, the group of a line, the one swap), label
// balance, determinism, --max-examples as a seeded sample in file order, and the errors.
#include "data/lm_tasks.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "data/lm_corpus.h"
#include "test_data.h"

namespace normlab::data {
namespace {

namespace fs = std::filesystem;

using testing::slurp;

std::vector<std::string> words_of(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// A lowercase word, by this test's reading of the rule: a-z and apostrophes, some letter.
bool lowercase(const std::string& w) {
  return w.find_first_not_of("abcdefghijklmnopqrstuvwxyz'") == std::string::npos &&
         w.find_first_of("abcdefghijklmnopqrstuvwxyz") != std::string::npos;
}

// n in letters: 0 -> "a", 27 -> "bb".
std::string letters(int n) {
  std::string s;
  do {
    s += static_cast<char>('a' + n % 26);
    n /= 26;
  } while (n > 0);
  return s;
}

// A document of `lines` verse lines with a title, speaker names, paragraphs and overlong lines;
// every line of 4 or more words is unique across documents (it carries the document's number).
std::string document_text(int doc, int lines) {
  const auto tag = [&](int j) { return letters(doc * 1000 + j); };
  std::string t = "Title Of Document " + tag(999) + "\n\n";
  for (int j = 0; j < lines; ++j) {
    if (j % 10 == 9) t += "\n";
    if (j % 7 == 3) t += "SPEAKER.\n";
    if (j % 13 == 5) {
      for (int k = 0; k < 31; ++k) t += tag(j) + (k < 30 ? " " : "\n");
    }
    switch (j % 4) {
      case 0: t += "the " + tag(j) + " of the land went home,\n"; break;
      case 1: t += "Enter Lord " + tag(j) + "X With Attendants.\n"; break;
      case 2: t += "o'er " + tag(j) + " 'tis ' " + tag(j) + "y\n"; break;
      default: t += "the the the " + tag(j) + ".\n"; break;
    }
  }
  return t;
}

struct FakeDocument {
  std::string name, group;
  LmSplit split;
  int number, lines;
};

// An lm-data folder written by write_lm_data: valid holds three groups (one of two editions),
// test two, train one.
std::vector<FakeDocument> fake_documents(int lines) {
  return {{"play/a_1", "play/a", LmSplit::kValid, 1, lines}, {"play/a_2", "play/a", LmSplit::kValid, 2, lines},
          {"play/b", "play/b", LmSplit::kValid, 3, lines},   {"wiki/c", "wiki/c", LmSplit::kValid, 4, lines / 2},
          {"play/d_1", "play/d", LmSplit::kTest, 5, lines},  {"play/d_2", "play/d", LmSplit::kTest, 6, lines},
          {"play/e", "play/e", LmSplit::kTest, 7, lines},    {"play/f", "play/f", LmSplit::kTrain, 8, lines}};
}

void write_fake_lm_data(const std::string& dir, const std::vector<FakeDocument>& docs) {
  LmCorpus corpus;
  std::map<std::string, LmSplit> split;
  for (const auto& d : docs) {
    LmDocument doc;
    doc.source = "shakespeare";
    doc.name = d.name;
    doc.group = d.group;
    doc.file = d.name + ".txt";
    doc.text = document_text(d.number, d.lines);
    doc.words = static_cast<int64_t>(words_of(doc.text).size());
    corpus.documents.push_back(doc);
    split[d.group] = d.split;
  }
  write_lm_data(corpus, split, {}, dir);
}

// The units of each document of a split as this test reads them: name -> (group, units).
struct SourceDoc {
  std::string name, group;
  std::vector<std::string> units;
};
std::vector<SourceDoc> source_documents(const std::vector<FakeDocument>& docs, LmSplit split) {
  std::vector<SourceDoc> out;
  for (const auto& d : docs) {
    if (d.split != split) continue;
    SourceDoc s{d.name, d.group, {}};
    std::istringstream in(document_text(d.number, d.lines));
    for (std::string line; std::getline(in, line);) {
      const auto n = words_of(line).size();
      if (n >= 4 && n <= 30) s.units.push_back(line);
    }
    out.push_back(s);
  }
  return out;
}

void expect_balanced(const std::vector<ClassificationExample>& examples, const std::string& what) {
  const double n = static_cast<double>(examples.size());
  double ones = 0;
  for (const auto& e : examples) ones += e.label == 1;
  EXPECT_GE(n, 150) << what;
  EXPECT_LT(std::abs(ones - n / 2), 3 * std::sqrt(n / 4)) << what << ": " << ones << " of " << n << " labelled 1";
}

class LmTasks : public ::testing::Test {
 protected:
  testing::ScratchDir dir_{"lm_tasks"};
  std::vector<FakeDocument> docs_ = fake_documents(100);
  void SetUp() override { write_fake_lm_data(dir_ / "lm", docs_); }
  std::string run(const std::string& out, const LmTaskOptions& options = {}) {
    write_lm_tasks(dir_ / "lm", dir_ / out, options);
    return dir_ / out;
  }
};

TEST(LmTaskPieces, UnitsAreLinesOfFourToThirtyWords) {
  const std::string text =
      "HAMLET.\nTo be, or not to be: that is the question:\n\n  Whether   'tis nobler\n"
      "in the  mind to suffer\t \n" + std::string(29, 'w') + "\n";
  LmTaskOptions o;
  EXPECT_EQ(task_units(text, o), (std::vector<std::string>{"To be, or not to be: that is the question:",
                                                           "in the mind to suffer"}));
  std::string thirty, thirty_one;
  for (int i = 0; i < 30; ++i) thirty += "w ";
  thirty_one = thirty + "w";
  EXPECT_EQ(task_units("a b c\n" + thirty + "\n" + thirty_one + "\nlast line has five words", o),
            (std::vector<std::string>{thirty.substr(0, 59), "last line has five words"}));
  o.min_words = 1;
  o.max_words = 1;
  EXPECT_EQ(task_units("HAMLET.\n\nTo be\n", o), std::vector<std::string>{"HAMLET."});
}

TEST(LmTaskPieces, OnlyDifferingLowercaseNeighboursSwap) {
  EXPECT_EQ(swappable_positions("The Cat sat on the mat."), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(swappable_positions("the the cat"), (std::vector<int64_t>{1}));
  EXPECT_EQ(swappable_positions("o'er 'tis ' x"), (std::vector<int64_t>{0}));  // "'" alone is no word
  EXPECT_EQ(swappable_positions("HAMLET. To be, or"), (std::vector<int64_t>{}));
  EXPECT_EQ(swappable_positions("caf\xc3\xa9 au lait"), (std::vector<int64_t>{1}));
  EXPECT_EQ(swap_adjacent_words("sat on the mat", 1), "sat the on mat");
  EXPECT_EQ(swap_adjacent_words("a b", 0), "b a");
  EXPECT_THROW(swap_adjacent_words("sat on the mat", 3), std::out_of_range);
  EXPECT_THROW(swap_adjacent_words("sat on the mat", -1), std::out_of_range);
}

// The draws as docs/data.md defines them, from a copy of the generator's raw outputs.
TEST(LmTaskPieces, DrawsAreDefinedOnRawOutputs) {
  auto rng = task_generator(1, "next-line", "valid");
  EXPECT_NE(rng(), task_generator(1, "next-line", "test")());
  EXPECT_NE(task_generator(1, "word-order", "valid")(), task_generator(2, "word-order", "valid")());
  for (int i = 0; i < 1000; ++i) {
    auto copy = rng;
    const uint64_t x = copy();
    ASSERT_EQ(draw_coin(rng), x >= (uint64_t{1} << 63));
    copy = rng;
    const uint64_t y = copy();
    // n = 3: 2^64 mod 3 = 1, so only 2^64 - 1 is rejected.
    if (y != UINT64_MAX) {
      ASSERT_EQ(draw_below(rng, 3), y % 3);
    }
  }
  // n = 2^63 + 1: 2^64 mod n = 2^63 - 1, so outputs of 2^63 + 1 or more are rejected; the result is x.
  const uint64_t n = (uint64_t{1} << 63) + 1;
  for (int i = 0; i < 100; ++i) {
    auto copy = rng;
    uint64_t x;
    while ((x = copy()) >= n) {
    }
    ASSERT_EQ(draw_below(rng, n), x);
    ASSERT_EQ(rng(), copy());
  }
  EXPECT_EQ(draw_below(rng, 1), 0u);
}

TEST_F(LmTasks, NextLinePairsTheFollowingUnitOrOneOfAnotherWork) {
  const auto out = run("tasks");
  for (const auto& [file, split] : {std::pair{"train", LmSplit::kValid}, std::pair{"dev", LmSplit::kTest}}) {
    const auto examples = read_classification_file(out + "/next-line/" + file + ".tsv");
    const auto sources = source_documents(docs_, split);
    std::map<std::string, std::set<std::string>> groups_of;  // unit -> groups holding it
    std::vector<std::pair<std::string, std::string>> expected;  // (A, the unit after it), in order
    for (const auto& d : sources) {
      for (const auto& u : d.units) groups_of[u].insert(d.group);
      for (size_t i = 0; i + 1 < d.units.size(); ++i) expected.emplace_back(d.units[i], d.units[i + 1]);
    }
    ASSERT_EQ(examples.size(), expected.size()) << file;
    std::map<std::string, int> negatives_from;  // group -> label-0 B drawn from it
    for (size_t i = 0; i < examples.size(); ++i) {
      const auto& e = examples[i];
      ASSERT_EQ(e.a, expected[i].first) << file << " line " << e.line;
      if (e.label == 1) {
        EXPECT_EQ(e.b, expected[i].second) << file << " line " << e.line;
        continue;
      }
      ASSERT_EQ(e.label, 0);
      ASSERT_TRUE(groups_of.count(e.b)) << "B is no unit of the split: " << e.b;
      const auto& a_groups = groups_of.at(e.a);
      for (const auto& g : groups_of.at(e.b)) {
        EXPECT_EQ(a_groups.count(g), 0u) << file << " line " << e.line << ": B from A's own group " << g;
        ++negatives_from[g];
      }
    }
    EXPECT_EQ(negatives_from.size(), split == LmSplit::kValid ? 3u : 2u) << file;
    expect_balanced(examples, std::string("next-line ") + file);
  }
}

TEST_F(LmTasks, WordOrderKeepsOrSwapsOnePairOfLowercaseWords) {
  const auto out = run("tasks");
  for (const auto& [file, split] : {std::pair{"train", LmSplit::kValid}, std::pair{"dev", LmSplit::kTest}}) {
    const auto examples = read_classification_file(out + "/word-order/" + file + ".tsv");
    std::vector<std::string> eligible;  // units with two differing lowercase neighbours, in order
    for (const auto& d : source_documents(docs_, split))
      for (const auto& u : d.units) {
        const auto w = words_of(u);
        bool any = false;
        for (size_t i = 0; i + 1 < w.size(); ++i) any |= w[i] != w[i + 1] && lowercase(w[i]) && lowercase(w[i + 1]);
        if (any) eligible.push_back(u);
      }
    ASSERT_EQ(examples.size(), eligible.size()) << file;
    for (size_t i = 0; i < examples.size(); ++i) {
      const auto& e = examples[i];
      EXPECT_TRUE(e.b.empty());
      if (e.label == 1) {
        EXPECT_EQ(e.a, eligible[i]) << file << " line " << e.line;
        continue;
      }
      // Exactly two positions differ, adjacent, holding the source's two lowercase words swapped.
      const auto got = words_of(e.a), want = words_of(eligible[i]);
      ASSERT_EQ(got.size(), want.size()) << e.a;
      std::vector<size_t> diff;
      for (size_t k = 0; k < got.size(); ++k)
        if (got[k] != want[k]) diff.push_back(k);
      ASSERT_EQ(diff.size(), 2u) << e.a << " | " << eligible[i];
      EXPECT_EQ(diff[1], diff[0] + 1) << e.a;
      EXPECT_EQ(got[diff[0]], want[diff[1]]);
      EXPECT_EQ(got[diff[1]], want[diff[0]]);
      EXPECT_TRUE(lowercase(want[diff[0]]) && lowercase(want[diff[1]])) << e.a;
      EXPECT_EQ(e.a.find("  "), std::string::npos);
    }
    expect_balanced(examples, std::string("word-order ") + file);
  }
}

TEST_F(LmTasks, FilesAreDeterministicAndTheManifestCountsThem) {
  const auto a = run("a"), b = run("b");
  LmTaskOptions other;
  other.seed = 2;
  const auto c = run("c", other);
  for (const auto& task : lm_task_names())
    for (const char* file : {"train", "dev"}) {
      const auto path = task + "/" + file + ".tsv";
      EXPECT_EQ(slurp(a + "/" + path), slurp(b + "/" + path)) << path;
      EXPECT_NE(slurp(a + "/" + path), slurp(c + "/" + path)) << path;
    }
  EXPECT_EQ(slurp(a + "/manifest.json"), slurp(b + "/manifest.json"));
  const auto m = nlohmann::json::parse(slurp(a + "/manifest.json"));
  EXPECT_EQ(m["version"], kLmTasksVersion);
  EXPECT_EQ(m["options"]["seed"], 1);
  EXPECT_EQ(m["options"]["min_words"], 4);
  for (const auto& task : lm_task_names())
    for (const auto& [file, split] : {std::pair{"train", "valid"}, std::pair{"dev", "test"}}) {
      const auto examples = read_classification_file(a + "/" + task + "/" + file + ".tsv");
      int64_t ones = 0;
      for (const auto& e : examples) ones += e.label;
      const auto& r = m["tasks"][task]["files"][file];
      EXPECT_EQ(r["examples"], examples.size()) << task << " " << file;
      EXPECT_EQ(r["labels"]["1"], ones);
      EXPECT_EQ(r["labels"]["0"], static_cast<int64_t>(examples.size()) - ones);
      EXPECT_EQ(r["source_file"], std::string(split) + ".txt");
      EXPECT_EQ(r["source_bytes"], fs::file_size(dir_ / ("lm/" + std::string(split) + ".txt")));
      EXPECT_EQ(r["documents"], std::string(split) == "valid" ? 4 : 3);
    }
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// --max-examples N: N lines of the whole file's (the same seed), in its order, every candidate
// as likely as any other: over 40 seeds the kept lines' positions spread over the whole file
// (a prefix, the rule before lm-tasks-2, would keep only the first N).
TEST_F(LmTasks, MaxExamplesIsASeededSampleInFileOrder) {
  constexpr int kSeeds = 40, kKept = 10;
  std::map<std::string, std::vector<int64_t>> positions;  // file -> kept lines' 0-based positions
  std::map<std::string, int64_t> candidates;
  std::set<std::string> samples;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    LmTaskOptions whole, few;
    whole.seed = few.seed = seed;
    few.max_examples = kKept;
    const auto all = run("all" + std::to_string(seed), whole), some = run("some" + std::to_string(seed), few);
    for (const auto& task : lm_task_names())
      for (const char* file : {"train", "dev"}) {
        const auto path = task + "/" + file + ".tsv";
        const auto lines = split_lines(slurp(all + "/" + path)), kept = split_lines(slurp(some + "/" + path));
        ASSERT_EQ(kept.size(), static_cast<size_t>(kKept)) << path;
        samples.insert(slurp(some + "/" + path));
        size_t at = 0;  // each kept line is a later line of the whole file than the one before
        for (const auto& line : kept) {
          while (at < lines.size() && lines[at] != line) ++at;
          ASSERT_LT(at, lines.size()) << path << " seed " << seed << ": not in order in the whole file: " << line;
          positions[path].push_back(static_cast<int64_t>(at++));
        }
        candidates[path] = static_cast<int64_t>(lines.size());
        const auto m = nlohmann::json::parse(slurp(some + "/manifest.json"));
        EXPECT_EQ(m["tasks"][task]["files"][file]["candidates"], lines.size());
        EXPECT_EQ(m["tasks"][task]["files"][file]["examples"], kKept);
      }
  }
  for (const auto& [path, kept] : positions) {
    const int64_t n = candidates[path];
    ASSERT_GT(n, 3 * kKept) << path;  // room for a sample to differ from a prefix
    // Uniform without replacement: each position kept with probability kKept / n; the kept
    // positions' mean is (n - 1) / 2 with a standard error under n / sqrt(12 * 400) = n / 69.
    double mean = 0;
    int64_t late = 0;
    for (const auto p : kept) {
      mean += static_cast<double>(p) / static_cast<double>(kept.size());
      late += p >= n / 2;
    }
    EXPECT_NEAR(mean, (n - 1) / 2.0, 4.0 * n / 69) << path;
    EXPECT_GT(late, 400 / 4) << path;  // about half of the 400 kept positions in the second half
  }
  EXPECT_EQ(samples.size(), static_cast<size_t>(kSeeds) * 4);  // every seed and file its own sample
}

void expect_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error; expected " << fragment;
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

TEST_F(LmTasks, BadFoldersAndOptionsAreNamed) {
  const auto out = run("out");
  const auto before = slurp(out + "/next-line/train.tsv");
  // A manifest of another folder: the offsets do not fit this folder's text.
  auto other = docs_;
  for (auto& d : other) d.number += 30;  // longer tags: every document's size differs
  write_fake_lm_data(dir_ / "other", other);
  fs::copy_file(dir_ / "other/manifest.json", dir_ / "lm/manifest.json", fs::copy_options::overwrite_existing);
  expect_error([&] { run("out"); }, dir_ / "lm/manifest.json: splits.valid.document_list[0] (play/a_1)");
  EXPECT_EQ(slurp(out + "/next-line/train.tsv"), before) << "a failed run changed OUT";
  for (const char* missing : {"manifest.json", "valid.txt", "test.txt"}) {
    write_fake_lm_data(dir_ / "lm", docs_);
    fs::remove(dir_ / ("lm/" + std::string(missing)));
    expect_error([&] { run("out"); }, dir_ / ("lm/" + std::string(missing)) + ": no such file");
  }
  // A test split of one work: next-line has no other work to draw from.
  auto one = docs_;
  for (auto& d : one)
    if (d.split == LmSplit::kTest) d.group = "play/d";
  write_fake_lm_data(dir_ / "lm", one);
  expect_error([&] { run("out"); }, dir_ / "lm/test.txt: next-line needs units from two or more groups");
  write_fake_lm_data(dir_ / "lm", docs_);
  for (auto [min, max, limit, option] : {std::tuple{0, 30, 0, "--min-words"}, std::tuple{5, 4, 0, "--max-words"},
                                         std::tuple{4, 30, -1, "--max-examples"}}) {
    LmTaskOptions o;
    o.min_words = min;
    o.max_words = max;
    o.max_examples = limit;
    EXPECT_THROW(o.validate(), std::invalid_argument);
    expect_error([&] { run("out", o); }, option);
  }
}

}  // namespace
}  // namespace normlab::data
