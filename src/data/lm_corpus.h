// The English language-model corpora of ../shared/data/lm (Shakespeare, Milton, Wikipedia) read,
// cleaned (lm_text.h), grouped into works and split by work into train / valid / test
// (docs/data.md, "English text for language models"). No torch.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace normlab::data {

// The sources `normlab lm-data` knows, in their default order.
const std::vector<std::string>& lm_source_names();

// One cleaned document: a Gutenberg file or a Wikipedia article.
struct LmDocument {
  std::string source;  // "shakespeare", "milton" or "wikipedia"
  std::string name;    // "shakespeare/hamlet_gut" (file stem) or "wikipedia/<title>"
  std::string title;   // metadata.txt's title, or the article's title ("" when unknown)
  std::string file;    // the input file, relative to the data folder
  std::string group;   // the unit of the split: all editions/transcriptions of one work together
  std::string text;    // cleaned; ends with "\n"
  int64_t words = 0;   // count_words(text)
  int64_t chars = 0;   // count_chars(text)
};

// What reading one source found (written to the manifest).
struct LmSourceReport {
  std::string source;
  int64_t files_read = 0;
  int64_t start_markers = 0, end_markers = 0;  // Gutenberg header/footer markers found
  int64_t line_numbers_removed = 0;
  std::vector<std::string> duplicates_dropped;  // "FILE (same text as FILE)"
  std::vector<std::string> overlaps;           // "FILE + FILE: N shared lines" that joined groups
  int64_t pages = 0, redirects = 0, other_namespaces = 0, empty_articles = 0;  // Wikipedia
  std::map<std::string, std::string> input_hashes;  // file -> core::hash_hex of its raw bytes
};

struct LmCorpus {
  std::vector<LmDocument> documents;  // by source in the order asked, then by name
  std::vector<LmSourceReport> reports;
};

// Reads DIR/shakespeare, DIR/milton (*.txt, *.txt.gz and metadata.txt[.gz]) and DIR/wikipedia
// (*.xml, *.bz2, *.xml.gz) as asked. Throws std::invalid_argument for an unknown source and
// std::runtime_error naming the file for a missing folder, a missing metadata.txt, an unreadable,
// corrupt or non-UTF-8 file.
LmCorpus read_lm_corpus(const std::string& dir, const std::vector<std::string>& sources);

// Reads a plain, .gz or .bz2 file whole. Throws std::runtime_error naming it when it is missing,
// unreadable, truncated or corrupt.
std::string read_compressed_file(const std::string& path);

enum class LmSplit { kTrain, kValid, kTest };
const char* lm_split_name(LmSplit split);

// The split rule: per source, groups in the order of (FNV-1a hash of the group name, name); a
// group goes to test while test holds less than test_fraction of the source's words and would
// then hold at most twice that, else to valid by the same rule, else to train.
struct LmSplitConfig {
  double valid_fraction = 0.05;  // share of each source's words aimed at for validation
  double test_fraction = 0.05;   // and for test
  void validate() const;        // throws std::invalid_argument listing every problem
};
std::map<std::string, LmSplit> split_lm_groups(const LmCorpus& corpus, const LmSplitConfig& config);

// Writes OUT/{train,valid,test}.txt (documents one after another in corpus order, each followed
// by a blank line except the last) and OUT/manifest.json, each atomically.
void write_lm_data(const LmCorpus& corpus, const std::map<std::string, LmSplit>& split,
                   const LmSplitConfig& config, const std::string& out);

}  // namespace normlab::data
