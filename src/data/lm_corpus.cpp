#include "data/lm_corpus.h"

#include <bzlib.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <regex>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "core/hash.h"
#include "core/problems.h"
#include "data/corpus.h"
#include "data/lm_text.h"

namespace normlab::data {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "hamlet_gut.txt.gz" -> "hamlet_gut".
std::string file_stem(const std::string& file) {
  for (const char* ext : {".txt.gz", ".txt", ".xml.bz2", ".bz2", ".xml.gz", ".xml"})
    if (ends_with(file, ext)) return file.substr(0, file.size() - std::strlen(ext));
  return file;
}

std::string read_gzip(const std::string& path) {
  struct Closer {
    void operator()(gzFile_s* f) const { gzclose(f); }
  };
  std::unique_ptr<gzFile_s, Closer> f(gzopen(path.c_str(), "rb"));
  if (!f) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno ? errno : ENOMEM));
  std::string out;
  std::vector<char> chunk(1 << 16);
  while (true) {
    const int got = gzread(f.get(), chunk.data(), static_cast<unsigned>(chunk.size()));
    if (got < 0) break;
    out.append(chunk.data(), static_cast<size_t>(got));
    if (got == 0) break;
  }
  int code = Z_OK;
  const char* message = gzerror(f.get(), &code);
  if (code != Z_OK)
    throw std::runtime_error("cannot read " + path + ": " + (code == Z_ERRNO ? std::strerror(errno) : message) +
                             " (corrupt or truncated gzip?)");
  return out;
}

std::string read_bzip2(const std::string& path) {
  const auto bytes = core::read_file(path);
  std::string out;
  size_t pos = 0;
  std::vector<char> chunk(1 << 16);
  // Streams one after another (as pbzip2 writes them) until the input is used up.
  while (pos < bytes.size()) {
    bz_stream s{};
    if (BZ2_bzDecompressInit(&s, 0, 0) != BZ_OK) throw std::runtime_error("cannot read " + path + ": bzip2 init failed");
    s.next_in = const_cast<char*>(bytes.data() + pos);
    s.avail_in = static_cast<unsigned>(bytes.size() - pos);
    int rc = BZ_OK;
    while (rc == BZ_OK) {
      s.next_out = chunk.data();
      s.avail_out = static_cast<unsigned>(chunk.size());
      rc = BZ2_bzDecompress(&s);
      out.append(chunk.data(), chunk.size() - s.avail_out);
      if (rc == BZ_OK && s.avail_in == 0 && s.avail_out != 0) {
        BZ2_bzDecompressEnd(&s);
        throw std::runtime_error("cannot read " + path + ": bzip2 stream ends early (truncated file)");
      }
    }
    BZ2_bzDecompressEnd(&s);
    if (rc != BZ_STREAM_END) {
      const char* what = rc == BZ_DATA_ERROR_MAGIC ? "not bzip2 data" : rc == BZ_DATA_ERROR ? "corrupt bzip2 data"
                                                                                            : "bzip2 error";
      throw std::runtime_error("cannot read " + path + ": " + what + " (code " + std::to_string(rc) + ")");
    }
    pos = bytes.size() - s.avail_in;
  }
  return out;
}

// Sorted names of the regular files in `dir` for which keep(name) holds.
template <typename Keep>
std::vector<std::string> list_files(const std::string& dir, Keep keep) {
  if (!fs::is_directory(dir)) throw std::runtime_error("cannot read " + dir + ": no such folder");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && keep(e.path().filename().string())) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

struct MetaEntry {
  std::string title, url;
};

// metadata.txt: "[key]" sections of "name = value" lines. Keys lose '(' and ')' so that
// "paradise_lost_(no_introduction)_gut" names paradise_lost_no_introduction_gut.txt.
std::map<std::string, MetaEntry> read_metadata(const std::string& dir) {
  std::string path = dir + "/metadata.txt.gz";
  if (!fs::exists(path)) path = dir + "/metadata.txt";
  if (!fs::exists(path)) throw std::runtime_error("cannot read " + dir + "/metadata.txt[.gz]: no such file (it pairs the editions)");
  const std::string text = read_compressed_file(path);
  std::map<std::string, MetaEntry> entries;
  std::string key;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (line.size() > 2 && line.front() == '[' && line.back() == ']') {
      key.clear();
      for (char c : line.substr(1, line.size() - 2))
        if (c != '(' && c != ')') key += c;
      entries[key];
      continue;
    }
    const size_t eq = line.find('=');
    if (key.empty() || eq == std::string::npos) continue;
    auto trim = [](std::string s) {
      s.erase(0, s.find_first_not_of(" \t"));
      s.erase(s.find_last_not_of(" \t") + 1);
      return s;
    };
    const std::string name = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    if (name == "title") entries[key].title = value;
    if (name == "url") entries[key].url = value;
  }
  return entries;
}

// Lowercase letters and digits only: "The Winter's Tale" and "The Winters Tale" agree.
std::string title_key(const std::string& title) {
  std::string k;
  for (char c : title)
    if (std::isalnum(static_cast<unsigned char>(c))) k += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return k;
}

// The play number of an Open Shakespeare Gutenberg URL: ".../etext98/2ws3310.txt" and
// ".../etext00/0ws3310.txt" (modern and Folio King Lear) both give "33".
std::string play_number(const std::string& url) {
  static const std::regex re(R"(/[0-9]ws([0-9][0-9])[0-9][0-9][a-z]?\.txt$)");
  std::smatch m;
  return std::regex_search(url, m, re) ? m[1].str() : "";
}

// Hashes (core/hash.h) of the distinct lines of >= 30 characters of a cleaned text (white space
// already squeezed, poem line numbers already cut), lowercased, sorted: to find files that hold
// the same text. A shared hash is taken for a shared line (64 bits: collisions negligible).
std::vector<uint64_t> long_lines(const std::string& text) {
  std::vector<uint64_t> out;
  size_t begin = 0;
  std::string l;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    l.clear();
    for (size_t i = begin; i < end; ++i) l += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
    begin = end + 1;
    if (l.size() >= 30) out.push_back(core::hash_bytes(l.data(), l.size()));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

size_t count_shared(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  size_t n = 0;
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    if (a[i] < b[j]) {
      ++i;
    } else if (b[j] < a[i]) {
      ++j;
    } else {
      ++n, ++i, ++j;
    }
  }
  return n;
}

struct UnionFind {
  std::vector<size_t> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  size_t find(size_t i) { return parent[i] == i ? i : parent[i] = find(parent[i]); }
  void join(size_t a, size_t b) {
    a = find(a), b = find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
};

// Two files hold the same text in part when they share >= 10 long lines and >= 5% of the
// smaller file's long lines (Comus inside two collections; Measured: 865 of 1407 lines).
constexpr size_t kOverlapMinLines = 10;
constexpr double kOverlapMinShare = 0.05;

void read_gutenberg_source(const std::string& dir, const std::string& source, LmCorpus& corpus) {
  LmSourceReport report;
  report.source = source;
  const std::string folder = dir + "/" + source;
  const auto meta = read_metadata(folder);
  const auto files = list_files(folder, [](const std::string& n) {
    return (ends_with(n, ".txt") || ends_with(n, ".txt.gz")) && n.rfind("metadata.txt", 0) != 0;
  });
  if (files.empty()) throw std::runtime_error("cannot read " + folder + ": no *.txt or *.txt.gz file");

  // Exact duplicates (same cleaned text) are read once: the file named in metadata.txt is kept,
  // else the first by name.
  std::vector<LmDocument> docs;
  std::map<std::string, size_t> by_text;
  for (const auto& file : files) {
    const std::string path = folder + "/" + file;
    const std::string raw = read_compressed_file(path);
    if (auto problem = utf8_problem(raw); !problem.empty()) throw std::runtime_error(path + ": " + problem);
    report.input_hashes[source + "/" + file] = core::hash_hex(core::hash_bytes(raw.data(), raw.size()));
    ++report.files_read;
    GutenbergCleanInfo info;
    LmDocument d;
    d.source = source;
    d.file = source + "/" + file;
    d.name = source + "/" + file_stem(file);
    d.text = clean_gutenberg(raw, &info);
    if (d.text.empty()) throw std::runtime_error(path + ": no text left after cleaning");
    report.start_markers += info.start_marker;
    report.end_markers += info.end_marker;
    report.line_numbers_removed += info.line_numbers_removed;
    if (auto it = meta.find(file_stem(file)); it != meta.end()) d.title = it->second.title;
    auto [it, fresh] = by_text.emplace(d.text, docs.size());
    if (fresh) {
      docs.push_back(std::move(d));
      continue;
    }
    LmDocument& kept = docs[it->second];
    const bool prefer_new = kept.title.empty() && !d.title.empty();
    std::string dropped = prefer_new ? kept.file : d.file, same_as = prefer_new ? d.file : kept.file;
    if (prefer_new) kept = std::move(d);
    report.duplicates_dropped.push_back(dropped + " (same text as " + same_as + ")");
  }

  // Groups: same play number or same title in metadata.txt (the two editions), or a shared text.
  UnionFind uf(docs.size());
  std::map<std::string, size_t> first_with_key;
  for (size_t i = 0; i < docs.size(); ++i) {
    const auto it = meta.find(docs[i].name.substr(source.size() + 1));
    if (it == meta.end()) continue;
    for (const auto& key : {"ws:" + play_number(it->second.url), "title:" + title_key(it->second.title)}) {
      if (key == "ws:" || key == "title:") continue;
      auto [at, fresh] = first_with_key.emplace(key, i);
      if (!fresh) uf.join(at->second, i);
    }
  }
  std::vector<std::vector<uint64_t>> lines(docs.size());
  for (size_t i = 0; i < docs.size(); ++i) lines[i] = long_lines(docs[i].text);
  for (size_t a = 0; a < docs.size(); ++a)
    for (size_t b = a + 1; b < docs.size(); ++b) {
      const size_t shared = count_shared(lines[a], lines[b]);
      const size_t smaller = std::min(lines[a].size(), lines[b].size());
      if (shared >= kOverlapMinLines && static_cast<double>(shared) >= kOverlapMinShare * static_cast<double>(smaller)) {
        if (uf.find(a) != uf.find(b))
          report.overlaps.push_back(docs[a].file + " + " + docs[b].file + ": " + std::to_string(shared) + " shared lines");
        uf.join(a, b);
      }
    }
  // A group is named after its first member by name, without the edition suffix.
  for (auto& d : docs) {
    std::string stem = docs[uf.find(static_cast<size_t>(&d - docs.data()))].name;
    for (const char* suffix : {"_gut_f", "_gut"})
      if (ends_with(stem, suffix)) {
        stem.erase(stem.size() - std::strlen(suffix));
        break;
      }
    d.group = stem;
  }
  for (auto& d : docs) {
    d.words = count_words(d.text);
    d.chars = count_chars(d.text);
    corpus.documents.push_back(std::move(d));
  }
  corpus.reports.push_back(std::move(report));
}

void read_wikipedia_source(const std::string& dir, LmCorpus& corpus) {
  LmSourceReport report;
  report.source = "wikipedia";
  const std::string folder = dir + "/wikipedia";
  const auto files = list_files(folder, [](const std::string& n) {
    return ends_with(n, ".xml") || ends_with(n, ".bz2") || ends_with(n, ".xml.gz");
  });
  if (files.empty()) throw std::runtime_error("cannot read " + folder + ": no *.xml, *.bz2 or *.xml.gz dump");
  std::vector<LmDocument> docs;
  std::set<std::string> titles;
  for (const auto& file : files) {
    const std::string path = folder + "/" + file;
    const std::string raw = read_compressed_file(path);
    if (auto problem = utf8_problem(raw); !problem.empty()) throw std::runtime_error(path + ": " + problem);
    report.input_hashes["wikipedia/" + file] = core::hash_hex(core::hash_bytes(raw.data(), raw.size()));
    ++report.files_read;
    for (auto& page : parse_mediawiki_pages(raw, path)) {
      ++report.pages;
      if (page.redirect) {
        ++report.redirects;
        continue;
      }
      if (page.ns != 0) {
        ++report.other_namespaces;
        continue;
      }
      const std::string body = clean_wikitext(page.text);
      if (body.empty() || !titles.insert(page.title).second) {
        ++report.empty_articles;
        continue;
      }
      LmDocument d;
      d.source = "wikipedia";
      d.name = d.group = "wikipedia/" + page.title;
      d.title = page.title;
      d.file = "wikipedia/" + file;
      d.text = page.title + "\n\n" + body;  // the title as the first paragraph, as WikiText-103 has it
      d.words = count_words(d.text);
      d.chars = count_chars(d.text);
      docs.push_back(std::move(d));
    }
  }
  std::sort(docs.begin(), docs.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (auto& d : docs) corpus.documents.push_back(std::move(d));
  corpus.reports.push_back(std::move(report));
}

}  // namespace

const std::vector<std::string>& lm_source_names() {
  static const std::vector<std::string> names = {"shakespeare", "milton", "wikipedia"};
  return names;
}

std::string read_compressed_file(const std::string& path) {
  if (!fs::exists(path)) throw std::runtime_error("cannot read " + path + ": no such file");
  if (ends_with(path, ".bz2")) return read_bzip2(path);
  return read_gzip(path);  // zlib reads plain files as they are
}

LmCorpus read_lm_corpus(const std::string& dir, const std::vector<std::string>& sources) {
  std::vector<std::string> problems;
  std::set<std::string> seen;
  for (const auto& s : sources) {
    const auto& known = lm_source_names();
    if (std::find(known.begin(), known.end(), s) == known.end())
      problems.push_back("unknown source '" + s + "' (known: shakespeare, milton, wikipedia)");
    else if (!seen.insert(s).second)
      problems.push_back("source '" + s + "' named twice");
  }
  if (sources.empty()) problems.push_back("no source asked for");
  core::throw_if_problems(problems);
  LmCorpus corpus;
  for (const auto& s : sources) {
    const size_t before = corpus.documents.size();
    if (s == "wikipedia") {
      read_wikipedia_source(dir, corpus);
    } else {
      read_gutenberg_source(dir, s, corpus);
      std::sort(corpus.documents.begin() + static_cast<long>(before), corpus.documents.end(),
                [](const auto& a, const auto& b) { return a.name < b.name; });
    }
  }
  return corpus;
}

const char* lm_split_name(LmSplit split) {
  switch (split) {
    case LmSplit::kTrain: return "train";
    case LmSplit::kValid: return "valid";
    case LmSplit::kTest: return "test";
  }
  return "?";
}

void LmSplitConfig::validate() const {
  std::vector<std::string> problems;
  if (!(valid_fraction >= 0 && valid_fraction < 0.5))
    problems.push_back("valid fraction " + std::to_string(valid_fraction) + " outside [0, 0.5)");
  if (!(test_fraction >= 0 && test_fraction < 0.5))
    problems.push_back("test fraction " + std::to_string(test_fraction) + " outside [0, 0.5)");
  core::throw_if_problems(problems);
}

std::map<std::string, LmSplit> split_lm_groups(const LmCorpus& corpus, const LmSplitConfig& config) {
  config.validate();
  std::map<std::string, LmSplit> split;
  for (const auto& name : lm_source_names()) {
    std::map<std::string, int64_t> group_words;
    int64_t total = 0;
    for (const auto& d : corpus.documents)
      if (d.source == name) {
        group_words[d.group] += d.words;
        total += d.words;
      }
    std::vector<std::pair<uint64_t, std::string>> order;
    for (const auto& [g, w] : group_words) order.emplace_back(core::hash_bytes(g.data(), g.size()), g);
    std::sort(order.begin(), order.end());
    const double test_target = config.test_fraction * static_cast<double>(total);
    const double valid_target = config.valid_fraction * static_cast<double>(total);
    double test = 0, valid = 0;
    for (const auto& [h, g] : order) {
      const double w = static_cast<double>(group_words[g]);
      if (test < test_target && test + w <= 2 * test_target) {
        split[g] = LmSplit::kTest;
        test += w;
      } else if (valid < valid_target && valid + w <= 2 * valid_target) {
        split[g] = LmSplit::kValid;
        valid += w;
      } else {
        split[g] = LmSplit::kTrain;
      }
    }
  }
  return split;
}

void write_lm_data(const LmCorpus& corpus, const std::map<std::string, LmSplit>& split,
                   const LmSplitConfig& config, const std::string& out) {
  fs::create_directories(out);
  using nlohmann::json;
  json manifest;
  manifest["cleaning_version"] = kLmCleaningVersion;
  manifest["format"] =
      "UTF-8 text; documents one after another, each followed by one blank line except the last; "
      "paragraphs within a document separated by one blank line; line breaks of verse kept; "
      "offset/bytes give each document's place in its file";
  manifest["split_rule"] = {
      {"valid_fraction", config.valid_fraction},
      {"test_fraction", config.test_fraction},
      {"rule",
       "per source, groups ordered by (FNV-1a 64 of the group name, name); a group goes to test while test "
       "holds less than test_fraction of the source's words and would then hold at most twice that, else "
       "to valid by the same rule, else to train"}};
  json sources = json::array();
  for (const auto& r : corpus.reports) {
    json s = {{"source", r.source}, {"files_read", r.files_read}, {"input_hashes", r.input_hashes}};
    if (r.source == "wikipedia") {
      s["pages"] = r.pages;
      s["redirects_skipped"] = r.redirects;
      s["other_namespaces_skipped"] = r.other_namespaces;
      s["empty_or_repeated_skipped"] = r.empty_articles;
    } else {
      s["gutenberg_start_markers"] = r.start_markers;
      s["gutenberg_end_markers"] = r.end_markers;
      s["files_without_markers_kept_whole"] = r.files_read - r.start_markers;
      s["poem_line_numbers_removed"] = r.line_numbers_removed;
      s["duplicates_dropped"] = r.duplicates_dropped;
      s["overlaps_grouped"] = r.overlaps;
    }
    sources.push_back(std::move(s));
  }
  manifest["sources"] = std::move(sources);

  for (const LmSplit which : {LmSplit::kTrain, LmSplit::kValid, LmSplit::kTest}) {
    std::string text;
    json docs = json::array();
    std::map<std::string, std::map<std::string, int64_t>> per_source;
    std::set<std::string> groups;
    for (const auto& d : corpus.documents) {
      const auto it = split.find(d.group);
      if (it == split.end()) throw std::logic_error("write_lm_data: group " + d.group + " has no split");
      if (it->second != which) continue;
      if (!text.empty()) text += '\n';
      docs.push_back({{"name", d.name}, {"source", d.source}, {"title", d.title}, {"file", d.file},
                      {"group", d.group}, {"offset", text.size()}, {"bytes", d.text.size()},
                      {"words", d.words}, {"chars", d.chars}});
      text += d.text;
      auto& c = per_source[d.source];
      c["documents"] += 1;
      c["words"] += d.words;
      c["chars"] += d.chars;
      groups.insert(d.group);
    }
    const std::string name = lm_split_name(which);
    core::write_file_atomic(out + "/" + name + ".txt", text);
    manifest["splits"][name] = {{"file", name + ".txt"},
                                {"bytes", text.size()},
                                {"documents", docs.size()},
                                {"groups", groups.size()},
                                {"words", count_words(text)},
                                {"chars", count_chars(text)},
                                {"per_source", per_source},
                                {"document_list", std::move(docs)}};
  }
  core::write_file_atomic(out + "/manifest.json", manifest.dump(1) + "\n");
}

}  // namespace normlab::data
