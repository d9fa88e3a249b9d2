// The LM corpora read, grouped and split (data/lm_corpus.h): broken files named, the real
// corpora's editions on one side of the split (pairs written out by hand here, independently of
// metadata.txt), split sizes, determinism.
#include "data/lm_corpus.h"

#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_data.h"

namespace normlab::data {
namespace {

using testing::slurp;

void expect_error_naming(const std::function<void()>& f, const std::string& name) {
  try {
    f();
    ADD_FAILURE() << "no error for " << name;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
}

TEST(LmCorpus, BrokenFilesAreNamed) {
  testing::ScratchDir dir("lm_corpus_broken");
  expect_error_naming([&] { read_compressed_file(dir / "absent.txt.gz"); }, "absent.txt.gz");
  testing::write_gzip(dir / "whole.txt.gz", std::string(5000, 'a'));
  const std::string gz = slurp(dir / "whole.txt.gz");
  testing::write_text(dir / "cut.txt.gz", gz.substr(0, gz.size() / 2));
  expect_error_naming([&] { read_compressed_file(dir / "cut.txt.gz"); }, "cut.txt.gz");
  testing::write_text(dir / "junk.xml.bz2", "BZh9 this is not bzip2");
  expect_error_naming([&] { read_compressed_file(dir / "junk.xml.bz2"); }, "junk.xml.bz2");
  // A folder without metadata.txt: the editions could not be paired.
  std::filesystem::create_directories(dir / "shakespeare");
  testing::write_gzip(dir / "shakespeare/a_gut.txt.gz", "text\n");
  expect_error_naming([&] { read_lm_corpus(dir.str(), {"shakespeare"}); }, "metadata.txt");
  expect_error_naming([&] { read_lm_corpus(dir.str(), {"milton"}); }, "milton");
  EXPECT_THROW(read_lm_corpus(dir.str(), {"poetry"}), std::invalid_argument);
}

// The modern edition of a Folio file whose name differs, by hand from the titles.
const std::map<std::string, std::string>& folio_twins() {
  static const std::map<std::string, std::string> twins = {
      {"all_is_well_that_ends_well", "alls_well_that_ends_well"},
      {"anthonie_and_cleopatra", "antony_and_cleopatra"},
      {"comedy_of_errours", "comedy_of_errors"},
      {"loves_labour_lost", "loves_labours_lost"},
      {"midsummer_nights_dreame", "midsummer_nights_dream"},
      {"titus_andronicus", "tragedy_of_titus_andronicus"},
      {"twelfe-night", "twelfth_night"},
  };
  return twins;
}

TEST(LmCorpus, RealCorporaEditionsNeverStraddleTheSplit) {
  NORMLAB_REQUIRE_SHARED_DATA(dir, "lm");
  const auto corpus = read_lm_corpus(dir, lm_source_names());
  const auto split = split_lm_groups(corpus, {});
  std::map<std::string, LmSplit> of;  // document name -> split
  std::map<std::string, std::set<std::string>> groups_of_source;
  std::map<LmSplit, int64_t> words;
  std::map<std::string, int64_t> source_words;
  for (const auto& d : corpus.documents) {
    of[d.name] = split.at(d.group);
    groups_of_source[d.source].insert(d.group);
    words[split.at(d.group)] += d.words;
    source_words[d.source] += d.words;
  }
  int folio = 0;
  for (const auto& [name, s] : of) {
    const std::string prefix = "shakespeare/", suffix = "_gut_f";
    if (name.rfind(prefix, 0) != 0 || name.size() < suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    ++folio;
    std::string stem = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (auto it = folio_twins().find(stem); it != folio_twins().end()) stem = it->second;
    const std::string modern = prefix + stem + "_gut";
    ASSERT_TRUE(of.count(modern)) << name << " has no modern edition " << modern;
    EXPECT_EQ(of[modern], s) << name << " and " << modern << " are split apart";
  }
  EXPECT_EQ(folio, 35);  // ls shakespeare/*_gut_f.txt.gz | wc -l
  // The Passionate Pilgrim prints poems of Love's Labour's Lost; Comus is in three Milton files.
  EXPECT_EQ(of["shakespeare/passionate_pilgrim_gut"], of["shakespeare/loves_labours_lost_gut"]);
  EXPECT_EQ(of["milton/comus_gut"], of["milton/lallegro_il_penseroso_comus_and_lycidas_gut"]);
  EXPECT_EQ(of["milton/comus_gut"], of["milton/poetical_works_gut"]);
  // 42 works (ls shakespeare/*_gut.txt.gz | wc -l), less one: the Pilgrim joins its play.
  // Milton: 5 groups of 7 distinct texts.
  EXPECT_EQ(groups_of_source["shakespeare"].size(), 41u);
  EXPECT_EQ(groups_of_source["milton"].size(), 5u);
  EXPECT_EQ(of.count("milton/comus"), 0u) << "an exact duplicate was kept";
  // 206 pages less 100 redirects (bzcat | grep -c '<redirect').
  EXPECT_EQ(groups_of_source["wikipedia"].size(), 106u);
  // Every source in each split, each held-out split between 3% and 10% of the words.
  const double total = static_cast<double>(words[LmSplit::kTrain] + words[LmSplit::kValid] + words[LmSplit::kTest]);
  for (const LmSplit s : {LmSplit::kValid, LmSplit::kTest}) {
    EXPECT_GT(words[s] / total, 0.03) << lm_split_name(s);
    EXPECT_LT(words[s] / total, 0.10) << lm_split_name(s);
    for (const auto& source : lm_source_names()) {
      bool any = false;
      for (const auto& d : corpus.documents) any |= d.source == source && split.at(d.group) == s;
      EXPECT_TRUE(any) << source << " has nothing in " << lm_split_name(s);
    }
  }
}

TEST(LmCorpus, OutputIsDeterministicAndTheManifestLocatesDocuments) {
  NORMLAB_REQUIRE_SHARED_DATA(dir, "lm");
  testing::ScratchDir out("lm_corpus_out");
  const std::vector<std::string> sources = {"milton", "wikipedia"};
  for (const char* run : {"a", "b"}) {
    const auto corpus = read_lm_corpus(dir, sources);
    write_lm_data(corpus, split_lm_groups(corpus, {}), {}, out / run);
  }
  for (const char* f : {"train.txt", "valid.txt", "test.txt", "manifest.json"})
    EXPECT_EQ(slurp(out / (std::string("a/") + f)), slurp(out / (std::string("b/") + f))) << f;
  const auto manifest = nlohmann::json::parse(slurp(out / "a/manifest.json"));
  for (const char* s : {"train", "valid", "test"}) {
    const std::string text = slurp(out / (std::string("a/") + s + ".txt"));
    const auto& split = manifest["splits"][s];
    EXPECT_EQ(split["bytes"].get<size_t>(), text.size());
    size_t end = 0;
    for (const auto& d : split["document_list"]) {
      const auto offset = d["offset"].get<size_t>(), bytes = d["bytes"].get<size_t>();
      EXPECT_EQ(offset, end == 0 ? 0 : end + 1) << d["name"];  // one blank line between documents
      const std::string doc = text.substr(offset, bytes);
      if (d["source"] == "wikipedia") {
        EXPECT_EQ(doc.rfind(d["title"].get<std::string>() + "\n\n", 0), 0u);
      }
      EXPECT_EQ(doc.back(), '\n');
      end = offset + bytes;
    }
    EXPECT_EQ(end, text.size());
  }
}

}  // namespace
}  // namespace normlab::data
