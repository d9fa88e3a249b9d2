#include "data/corpus.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "core/problems.h"

namespace normlab::data {
namespace {

namespace fs = std::filesystem;

enum class Space { kNone, kAscii, kTab, kUnicode };

// The white-space character starting at byte i of s: its kind and length in bytes.
std::pair<Space, size_t> space_at(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  switch (b(0)) {
    case ' ': case '\r': case '\n': case '\v': case '\f': return {Space::kAscii, 1};
    case '\t': return {Space::kTab, 1};
    case 0xC2: if (b(1) == 0xA0) return {Space::kUnicode, 2}; break;                  // U+00A0
    case 0xE1: if (b(1) == 0x9A && b(2) == 0x80) return {Space::kUnicode, 3}; break;  // U+1680
    case 0xE2:
      if (b(1) == 0x80 && ((b(2) >= 0x80 && b(2) <= 0x8A) || b(2) == 0xAF))         // U+2000..200A, U+202F
        return {Space::kUnicode, 3};
      if (b(1) == 0x81 && b(2) == 0x9F) return {Space::kUnicode, 3};                 // U+205F
      break;
    case 0xE3: if (b(1) == 0x80 && b(2) == 0x80) return {Space::kUnicode, 3}; break;  // U+3000
  }
  return {Space::kNone, 0};
}

std::string hex_bytes(const std::string& s, size_t begin, size_t count) {
  std::ostringstream out;
  for (size_t k = begin; k < std::min(s.size(), begin + count); ++k) {
    if (k > begin) out << ' ';
    out << "0x" << std::uppercase << std::hex << static_cast<int>(static_cast<unsigned char>(s[k]));
  }
  return out.str();
}

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

}  // namespace

std::string resolve_corpus_file(const std::string& prefix, const std::string& lang) {
  const std::string plain = prefix + "." + lang, gz = plain + ".gz";
  std::error_code ec;
  const bool has_plain = fs::exists(plain, ec), has_gz = fs::exists(gz, ec);
  if (has_plain && has_gz)
    throw std::runtime_error("both " + plain + " and " + gz + " exist; remove one so that it is clear which to read");
  if (has_plain) return plain;
  if (has_gz) return gz;
  throw std::runtime_error("cannot find " + plain + " or " + gz + " (--train/--prefix PREFIX reads PREFIX.LANG[.gz])");
}

std::string normalize_whitespace(const std::string& line, NormalizationStats* stats) {
  std::string out;
  out.reserve(line.size());
  bool pending_space = false, tab = false, unicode = false, trimmed = false;
  for (size_t i = 0; i < line.size();) {
    const auto [kind, len] = space_at(line, i);
    if (kind == Space::kNone) {
      if (pending_space) out.push_back(' ');
      pending_space = false;
      out.push_back(line[i++]);
      continue;
    }
    tab |= kind == Space::kTab;
    unicode |= kind == Space::kUnicode;
    if (out.empty()) trimmed = true;  // leading white space
    else pending_space = true;
    i += len;
  }
  trimmed |= pending_space;  // trailing white space
  if (stats) {
    stats->lines_changed += out != line;
    stats->with_tab += tab;
    stats->with_unicode_space += unicode;
    stats->trimmed += trimmed;
  }
  return out;
}

std::string utf8_problem(const std::string& s) {
  const auto at = [&](size_t i, size_t n, const char* what) {
    return std::string(what) + " at byte " + std::to_string(i + 1) + " (" + hex_bytes(s, i, n) + ")";
  };
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == 0) return at(i, 1, "NUL byte");
    if (c < 0x80) { ++i; continue; }
    size_t n = 0;
    uint32_t cp = 0, min = 0;
    if (c >= 0xC2 && c <= 0xDF) { n = 2; cp = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; cp = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; cp = c & 0x07; min = 0x10000; }
    else return at(i, 1, "invalid UTF-8");
    if (i + n > s.size()) return at(i, s.size() - i, "invalid UTF-8 (truncated sequence)");
    for (size_t k = 1; k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return at(i, k + 1, "invalid UTF-8");
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return at(i, n, "invalid UTF-8");
    i += n;
  }
  return {};
}

std::vector<std::string> read_text_lines(const std::string& path, NormalizationStats* stats) {
  // gzopen reads gzip and, transparently, plain files; gzread (not gzgets) so that a NUL byte
  // or a very long line cannot be silently cut.
  const bool stdin_ = path == "-";
  const std::string name = stdin_ ? "<stdin>" : path;
  errno = 0;
  std::unique_ptr<gzFile_s, GzCloser> file(stdin_ ? gzdopen(dup(0), "rb") : gzopen(path.c_str(), "rb"));
  if (!file) throw std::runtime_error("cannot read " + name + ": " + std::strerror(errno ? errno : ENOMEM));
  std::vector<std::string> lines;
  std::string pending;
  std::vector<char> chunk(1 << 16);
  const auto add_line = [&](std::string raw) {
    const auto where = name + ":" + std::to_string(lines.size() + 1) + ": ";
    if (auto problem = utf8_problem(raw); !problem.empty()) throw std::runtime_error(where + problem);
    lines.push_back(normalize_whitespace(raw, stats));
  };
  for (;;) {
    const int got = gzread(file.get(), chunk.data(), static_cast<unsigned>(chunk.size()));
    if (got < 0) {
      int code = 0;
      const char* message = gzerror(file.get(), &code);
      throw std::runtime_error("cannot read " + name + " after line " + std::to_string(lines.size()) +
                               ": " + (code == Z_ERRNO ? std::strerror(errno) : message));
    }
    if (got == 0) break;
    size_t start = 0;
    for (size_t i = 0; i < static_cast<size_t>(got); ++i) {
      if (chunk[i] != '\n') continue;
      pending.append(chunk.data() + start, i - start);
      add_line(std::move(pending));
      pending.clear();
      start = i + 1;
    }
    pending.append(chunk.data() + start, static_cast<size_t>(got) - start);
  }
  int code = 0;
  const char* message = gzerror(file.get(), &code);
  if (code != Z_OK)
    throw std::runtime_error("cannot read " + name + " after line " + std::to_string(lines.size()) + ": " + message);
  if (!pending.empty()) add_line(std::move(pending));  // last line without a newline
  return lines;
}

ParallelText read_parallel(const std::string& prefix, const std::string& src_lang,
                           const std::string& tgt_lang, const ReadOptions& options) {
  if (src_lang == tgt_lang)
    throw std::invalid_argument("source and target language are both '" + src_lang + "'");
  if (options.max_pairs < 0)
    throw std::invalid_argument("--max-pairs must be >= 0 (0: all), got " + std::to_string(options.max_pairs));
  ParallelText text;
  text.src_path = resolve_corpus_file(prefix, src_lang);
  text.tgt_path = resolve_corpus_file(prefix, tgt_lang);
  text.src = read_text_lines(text.src_path, &text.src_stats);
  text.tgt = read_text_lines(text.tgt_path, &text.tgt_stats);
  if (text.src.size() != text.tgt.size())
    throw std::runtime_error(text.src_path + " has " + std::to_string(text.src.size()) + " lines but " +
                             text.tgt_path + " has " + std::to_string(text.tgt.size()) +
                             "; line i of one must translate line i of the other");
  if (options.max_pairs > 0 && static_cast<size_t>(options.max_pairs) < text.src.size()) {
    text.src.resize(static_cast<size_t>(options.max_pairs));
    text.tgt.resize(static_cast<size_t>(options.max_pairs));
  }
  return text;
}

std::vector<std::string> FilterOptions::validate() const {
  std::vector<std::string> problems;
  if (max_positions < 2)
    problems.push_back("--max-positions must be >= 2 (one token and </s>), got " + std::to_string(max_positions));
  if (!(max_length_ratio == 0 || max_length_ratio >= 1))
    problems.push_back("--max-length-ratio must be 0 (off) or >= 1, got " + std::to_string(max_length_ratio));
  return problems;
}

FilterResult filter_pairs(const std::vector<Sentence>& src, const std::vector<Sentence>& tgt,
                          const FilterOptions& options) {
  core::throw_if_problems(options.validate());
  if (src.size() != tgt.size())
    throw std::invalid_argument("filter_pairs: " + std::to_string(src.size()) + " source but " +
                                std::to_string(tgt.size()) + " target sentences");
  FilterResult result;
  for (size_t i = 0; i < src.size(); ++i) {
    const auto n = static_cast<int64_t>(src[i].size()), m = static_cast<int64_t>(tgt[i].size());
    const auto shorter = std::min(n, m), longer = std::max(n, m);
    if (options.drop_empty && shorter == 0) {
      ++result.empty;
    } else if (longer + 1 > options.max_positions) {
      ++result.too_long;
    } else if (options.max_length_ratio > 0 && longer > 0 &&
               (shorter == 0 || static_cast<double>(longer) / static_cast<double>(shorter) > options.max_length_ratio)) {
      ++result.bad_ratio;
    } else {
      result.kept.push_back(static_cast<int64_t>(i));
    }
  }
  return result;
}

}  // namespace normlab::data
