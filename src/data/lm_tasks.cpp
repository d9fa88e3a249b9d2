#include "data/lm_tasks.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "core/hash.h"
#include "core/problems.h"
#include "data/lm_text.h"

namespace normlab::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The output files and the lm-data split each is built from.
const std::pair<const char*, const char*> kFiles[] = {{"train", "valid"}, {"dev", "test"}};

const char* kUnitRule =
    "the lines of a document (split at LF) with min_words..max_words words (separated by runs of ASCII "
    "white space), in document order, words joined by single spaces";
const char* kSeedRule =
    "per task and file, std::mt19937_64 seeded with core::hash_bytes (FNV-1a 64 over 64-bit little-endian "
    "words) of the 8 bytes of --seed, then TASK NUL, then SPLIT NUL (valid for train.tsv, test for dev.tsv); "
    "coin: top bit of one output (1: label 1); uniform k in [0, n): one output x % n, rejecting "
    "x >= 2^64 - 2^64 mod n; decisions in file order; --max-examples N (fewer than the candidates C) then "
    "keeps a sample of N in file order, the same generator going on: candidate t (0-based) is kept when "
    "uniform k in [0, C - t) < N - (kept so far) (Knuth's selection sampling, TAOCP 3.4.2 Algorithm S)";
const char* kNextLineRule =
    "BERT's next-sentence prediction (Devlin et al. 2019, 3.1 Task #2): for each document and each unit i "
    "with a unit i+1 in the same document, a coin; 1: 1 TAB unit_i TAB unit_i+1; 0: 0 TAB unit_i TAB R, R the "
    "k-th unit, k uniform, of the units, in order, of the split's documents of other groups (works)";
const char* kWordOrderRule =
    "acceptability in the spirit of CoLA: each unit with an adjacent pair of differing words made of "
    "lowercase ASCII letters and apostrophes (at least one letter), a coin; 1: 1 TAB unit; 0: 0 TAB unit "
    "with one such pair, drawn uniformly, swapped; other units left out";

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::vector<std::string> split_words(const std::string& line) {
  std::vector<std::string> words;
  for (size_t i = 0; i < line.size();) {
    while (i < line.size() && is_ascii_space(line[i])) ++i;
    const size_t start = i;
    while (i < line.size() && !is_ascii_space(line[i])) ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

std::string join_words(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// Lowercase ASCII letters and apostrophes, at least one letter ("'tis", "o'er"; not "'" alone).
bool is_lowercase_word(const std::string& word) {
  bool letter = false;
  for (char c : word) {
    if (c >= 'a' && c <= 'z') letter = true;
    else if (c != '\'') return false;
  }
  return letter;
}

// The k-th (0-based) index in [0, total) outside `skip`: ascending, disjoint [begin, end) ranges.
size_t nth_outside(size_t k, const std::vector<std::pair<size_t, size_t>>& skip) {
  for (const auto& [begin, end] : skip) {
    if (k < begin) break;
    k += end - begin;
  }
  return k;
}

}  // namespace

const std::vector<std::string>& lm_task_names() {
  static const std::vector<std::string> names = {"next-line", "word-order"};
  return names;
}

void LmTaskOptions::validate() const {
  std::vector<std::string> problems;
  if (min_words < 1) problems.push_back("--min-words must be at least 1, got " + std::to_string(min_words));
  if (max_words < min_words)
    problems.push_back("--max-words must be at least --min-words (" + std::to_string(min_words) + "), got " +
                       std::to_string(max_words));
  if (max_examples < 0)
    problems.push_back("--max-examples must be 0 (all) or positive, got " + std::to_string(max_examples));
  core::throw_if_problems(problems);
}

std::vector<std::string> task_units(const std::string& document_text, const LmTaskOptions& options) {
  std::vector<std::string> units;
  for (size_t start = 0; start < document_text.size();) {
    size_t end = document_text.find('\n', start);
    if (end == std::string::npos) end = document_text.size();
    const auto words = split_words(document_text.substr(start, end - start));
    start = end + 1;
    const auto n = static_cast<int64_t>(words.size());
    if (n >= options.min_words && n <= options.max_words) units.push_back(join_words(words));
  }
  return units;
}

std::vector<int64_t> swappable_positions(const std::string& unit) {
  const auto words = split_words(unit);
  std::vector<int64_t> positions;
  for (size_t i = 0; i + 1 < words.size(); ++i)
    if (words[i] != words[i + 1] && is_lowercase_word(words[i]) && is_lowercase_word(words[i + 1]))
      positions.push_back(static_cast<int64_t>(i));
  return positions;
}

std::string swap_adjacent_words(const std::string& unit, int64_t i) {
  auto words = split_words(unit);
  if (i < 0 || static_cast<size_t>(i) + 1 >= words.size())
    throw std::out_of_range("swap_adjacent_words: no words " + std::to_string(i) + " and " + std::to_string(i + 1) +
                            " in a unit of " + std::to_string(words.size()) + " words");
  std::swap(words[static_cast<size_t>(i)], words[static_cast<size_t>(i) + 1]);
  return join_words(words);
}

std::mt19937_64 task_generator(uint64_t seed, const std::string& task, const std::string& split) {
  uint64_t h = core::hash_bytes(&seed, sizeof seed);
  h = core::hash_bytes(task.c_str(), task.size() + 1, h);
  h = core::hash_bytes(split.c_str(), split.size() + 1, h);
  return std::mt19937_64(h);
}

uint64_t draw_below(std::mt19937_64& rng, uint64_t n) {
  if (n == 0) throw std::invalid_argument("draw_below: n must be positive");
  const uint64_t rest = (uint64_t{0} - n) % n;  // 2^64 mod n: the outputs >= 2^64 - rest would bias x % n
  for (;;) {
    const uint64_t x = rng();
    if (rest == 0 || x < uint64_t{0} - rest) return x % n;
  }
}

bool draw_coin(std::mt19937_64& rng) { return (rng() >> 63) != 0; }

// n of `items` drawn uniformly without replacement, in their order (kSeedRule's Algorithm S).
template <class T>
std::vector<T> sample_in_order(std::vector<T> items, size_t n, std::mt19937_64& rng) {
  std::vector<T> kept;
  kept.reserve(n);
  for (size_t t = 0; t < items.size() && kept.size() < n; ++t)
    if (draw_below(rng, items.size() - t) < n - kept.size()) kept.push_back(std::move(items[t]));
  return kept;
}

std::vector<ClassificationExample> make_next_line_examples(const std::vector<TaskDocument>& documents,
                                                           std::mt19937_64& rng) {
  // Every unit in order, and per group the ranges of its documents' units in that order.
  std::vector<const std::string*> all;
  std::map<std::string, std::vector<std::pair<size_t, size_t>>> ranges;
  for (const auto& d : documents) {
    if (d.units.empty()) continue;
    ranges[d.group].emplace_back(all.size(), all.size() + d.units.size());
    for (const auto& u : d.units) all.push_back(&u);
  }
  if (ranges.size() < 2)
    throw std::invalid_argument("next-line needs units from two or more groups (works) to draw a line of another "
                                "work from; found " + std::to_string(ranges.size()));
  std::vector<ClassificationExample> examples;
  for (const auto& d : documents) {
    if (d.units.empty()) continue;
    const auto& own = ranges.at(d.group);
    size_t own_units = 0;
    for (const auto& [begin, end] : own) own_units += end - begin;
    for (size_t i = 0; i + 1 < d.units.size(); ++i) {
      ClassificationExample ex;
      ex.a = d.units[i];
      ex.label = draw_coin(rng) ? 1 : 0;
      ex.b = ex.label == 1 ? d.units[i + 1] : *all[nth_outside(draw_below(rng, all.size() - own_units), own)];
      examples.push_back(std::move(ex));
    }
  }
  return examples;
}

std::vector<ClassificationExample> make_word_order_examples(const std::vector<TaskDocument>& documents,
                                                            std::mt19937_64& rng) {
  std::vector<ClassificationExample> examples;
  for (const auto& d : documents)
    for (const auto& unit : d.units) {
      const auto positions = swappable_positions(unit);
      if (positions.empty()) continue;
      ClassificationExample ex;
      ex.label = draw_coin(rng) ? 1 : 0;
      ex.a = ex.label == 1 ? unit : swap_adjacent_words(unit, positions[draw_below(rng, positions.size())]);
      examples.push_back(std::move(ex));
    }
  return examples;
}

namespace {

// `key` of `object` as type T; std::runtime_error "WHERE: no KEY" / "WHERE.KEY: not T" otherwise.
template <typename T>
T field(const json& object, const std::string& key, const std::string& where, const char* type) {
  if (!object.is_object() || !object.contains(key)) throw std::runtime_error(where + ": no \"" + key + "\"");
  try {
    return object.at(key).get<T>();
  } catch (const json::exception&) {
    throw std::runtime_error(where + "." + key + ": not " + type);
  }
}

void require_file(const std::string& path) {
  if (!fs::is_regular_file(path))
    throw std::runtime_error(path + ": no such file (expected a `normlab lm-data` output folder)");
}

json read_manifest(const std::string& path) {
  require_file(path);
  const auto bytes = core::read_file(path);
  try {
    return json::parse(bytes.begin(), bytes.end());
  } catch (const json::exception& e) {
    throw std::runtime_error(path + ": not valid JSON (" + e.what() + ")");
  }
}

// Throws naming the manifest (`where`) when a document is not where lm-data puts it: right after
// the previous one and a blank line (at `expected_offset`), ending with "\n", with the manifest's
// word count (words < 0: none given).
void check_document(const std::string& text, int64_t offset, int64_t bytes, int64_t words, int64_t expected_offset,
                    const std::string& where, const std::string& file) {
  const auto size = static_cast<int64_t>(text.size());
  const auto fail = [&](const std::string& what) {
    throw std::runtime_error(where + ": " + what + " in " + file + " (" + std::to_string(size) +
                             " bytes): a manifest of another folder?");
  };
  if (offset != expected_offset)
    fail("offset " + std::to_string(offset) + " but the previous document and a blank line end at " +
         std::to_string(expected_offset));
  if (bytes <= 0 || offset + bytes > size)
    fail("bytes " + std::to_string(bytes) + " from offset " + std::to_string(offset));
  const auto byte = [&](int64_t i) { return text[static_cast<size_t>(i)]; };
  if (byte(offset + bytes - 1) != '\n' || (offset > 0 && byte(offset - 1) != '\n'))
    fail("bytes " + std::to_string(offset) + ".." + std::to_string(offset + bytes) + " are not whole lines");
  const auto counted = count_words(text.substr(static_cast<size_t>(offset), static_cast<size_t>(bytes)));
  if (words >= 0 && counted != words)
    fail(std::to_string(words) + " words in the manifest but " + std::to_string(counted));
}

}  // namespace

TaskSplit read_task_split(const std::string& data_dir, const std::string& split, const LmTaskOptions& options) {
  const std::string manifest_path = data_dir + "/manifest.json", file = split + ".txt", path = data_dir + "/" + file;
  const json manifest = read_manifest(manifest_path);
  require_file(path);
  const auto raw = core::read_file(path);
  const std::string text(raw.begin(), raw.end());
  const std::string where = manifest_path + ": splits." + split;
  if (!manifest.contains("splits") || !manifest["splits"].is_object() || !manifest["splits"].contains(split))
    throw std::runtime_error(manifest_path + ": no splits." + split);
  const auto& entry = manifest["splits"][split];
  const auto list = field<json>(entry, "document_list", where, "an array");
  if (!list.is_array()) throw std::runtime_error(where + ".document_list: not an array");
  TaskSplit out;
  out.file = file;
  out.bytes = static_cast<int64_t>(text.size());
  out.hash = core::hash_hex(core::hash_bytes(text.data(), text.size()));
  std::set<std::string> groups;
  int64_t next = 0;  // where the next document starts
  for (size_t i = 0; i < list.size(); ++i) {
    const auto at = where + ".document_list[" + std::to_string(i) + "]";
    const auto& d = list[i];
    TaskDocument doc{field<std::string>(d, "name", at, "a string"), field<std::string>(d, "group", at, "a string"), {}};
    const auto offset = field<int64_t>(d, "offset", at, "an integer");
    const auto bytes = field<int64_t>(d, "bytes", at, "an integer");
    const auto words = d.contains("words") ? field<int64_t>(d, "words", at, "an integer") : -1;
    check_document(text, offset, bytes, words, next, at + " (" + doc.name + ")", file);
    doc.units = task_units(text.substr(static_cast<size_t>(offset), static_cast<size_t>(bytes)), options);
    next = offset + bytes + 1;
    groups.insert(doc.group);
    out.documents.push_back(std::move(doc));
  }
  if (out.documents.empty()) throw std::runtime_error(where + ": no documents");
  if (next - 1 != out.bytes)
    throw std::runtime_error(where + ": the documents end at byte " + std::to_string(next - 1) + " but " + file +
                             " has " + std::to_string(out.bytes) + ": a manifest of another folder?");
  out.groups = static_cast<int64_t>(groups.size());
  return out;
}

namespace {

std::vector<ClassificationExample> make_examples(const std::string& task, const std::vector<TaskDocument>& docs,
                                                 std::mt19937_64& rng) {
  if (task == "next-line") return make_next_line_examples(docs, rng);
  if (task == "word-order") return make_word_order_examples(docs, rng);
  throw std::logic_error("make_examples: unknown task " + task);
}

json report_json(const LmTaskFileReport& r) {
  json labels = json::object();
  for (const auto& [label, n] : r.labels) labels[std::to_string(label)] = n;
  return {{"file", r.task + "/" + r.file + ".tsv"}, {"split", r.split},          {"source_file", r.source_file},
          {"source_bytes", r.source_bytes},         {"source_hash", r.source_hash}, {"documents", r.documents},
          {"groups", r.groups},                     {"units", r.units},           {"candidates", r.candidates},
          {"examples", r.examples},                 {"labels", labels}};
}

json manifest_json(const std::string& data_dir, const LmTaskOptions& o, const std::vector<LmTaskFileReport>& reports) {
  json m;
  m["version"] = kLmTasksVersion;
  m["data"] = data_dir;
  m["format"] = "UTF-8 TSV, one example a line, no header: LABEL TAB A (word-order) or LABEL TAB A TAB B (next-line)";
  m["options"] = {{"seed", o.seed}, {"min_words", o.min_words}, {"max_words", o.max_words},
                  {"max_examples", o.max_examples}};
  m["units"] = kUnitRule;
  m["randomness"] = kSeedRule;
  for (const auto& r : reports) {
    auto& task = m["tasks"][r.task];
    task["kind"] = r.task == "next-line" ? "pair" : "single";
    task["rule"] = r.task == "next-line" ? kNextLineRule : kWordOrderRule;
    task["candidates_are"] = r.task == "next-line" ? "units with a next unit in their document"
                                                   : "units with a swappable pair of lowercase words";
    task["files"][r.file] = report_json(r);
  }
  return m;
}

// One output file: its examples (lines numbered) and what it holds.
std::vector<ClassificationExample> build_file(const std::string& data_dir, const TaskSplit& s,
                                              const LmTaskOptions& options, LmTaskFileReport& r) {
  auto rng = task_generator(options.seed, r.task, r.split);
  std::vector<ClassificationExample> examples;
  try {
    examples = make_examples(r.task, s.documents, rng);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(data_dir + "/" + s.file + ": " + e.what());
  }
  r.source_file = s.file;
  r.source_hash = s.hash;
  r.source_bytes = s.bytes;
  r.documents = static_cast<int64_t>(s.documents.size());
  r.groups = s.groups;
  for (const auto& d : s.documents) r.units += static_cast<int64_t>(d.units.size());
  r.candidates = static_cast<int64_t>(examples.size());
  if (options.max_examples > 0 && r.candidates > options.max_examples)
    examples = sample_in_order(std::move(examples), static_cast<size_t>(options.max_examples), rng);
  if (examples.empty())
    throw std::runtime_error(data_dir + "/" + s.file + ": no " + r.task + " example (" + std::to_string(r.units) +
                             " units of " + std::to_string(options.min_words) + ".." +
                             std::to_string(options.max_words) + " words)");
  r.labels = {{0, 0}, {1, 0}};
  for (size_t i = 0; i < examples.size(); ++i) {
    examples[i].line = static_cast<int64_t>(i) + 1;
    ++r.labels[examples[i].label];
  }
  r.examples = static_cast<int64_t>(examples.size());
  return examples;
}

}  // namespace

std::vector<LmTaskFileReport> write_lm_tasks(const std::string& data_dir, const std::string& out,
                                             const LmTaskOptions& options) {
  options.validate();
  std::map<std::string, TaskSplit> splits;
  for (const auto& [file, split] : kFiles) splits[split] = read_task_split(data_dir, split, options);
  // Every file is built before any is written, so that a failure leaves OUT as it was.
  std::vector<LmTaskFileReport> reports;
  std::vector<std::vector<ClassificationExample>> files;
  for (const auto& task : lm_task_names())
    for (const auto& [file, split] : kFiles) {
      LmTaskFileReport r;
      r.task = task;
      r.file = file;
      r.split = split;
      files.push_back(build_file(data_dir, splits.at(split), options, r));
      reports.push_back(std::move(r));
    }
  for (size_t i = 0; i < reports.size(); ++i) {
    fs::create_directories(out + "/" + reports[i].task);
    write_classification_file(out + "/" + reports[i].task + "/" + reports[i].file + ".tsv", files[i]);
  }
  core::write_file_atomic(out + "/manifest.json", manifest_json(data_dir, options, reports).dump(1) + "\n");
  return reports;
}

}  // namespace normlab::data
