// Parallel text files (PREFIX.LANG or PREFIX.LANG.gz, UTF-8, one sentence a line), read with
// whitespace normalised, and the length filters applied once the text is encoded (docs/data.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/batch.h"

namespace normlab::data {

// PREFIX.LANG if it exists, else PREFIX.LANG.gz. Throws std::runtime_error naming both
// candidates when neither exists, and when both do (which one was meant is unclear).
std::string resolve_corpus_file(const std::string& prefix, const std::string& lang);

// What normalisation changed, in lines (a line can count under several reasons).
struct NormalizationStats {
  int64_t lines_changed = 0;   // lines whose text differs from the raw line
  int64_t with_tab = 0;        // lines with a TAB
  int64_t with_unicode_space = 0;  // lines with U+00A0 or another non-ASCII space separator
  int64_t trimmed = 0;         // lines with leading or trailing white space
};

// Strips, collapses every run of white space to one ASCII space. White space: ASCII space,
// TAB, CR, LF, VT, FF and the Unicode space separators (Zs: U+00A0, U+1680, U+2000..U+200A,
// U+202F, U+205F, U+3000). Expects valid UTF-8. Adds what it changed to `stats` if given.
std::string normalize_whitespace(const std::string& line, NormalizationStats* stats = nullptr);

// Empty when `text` is valid UTF-8 (shortest forms, no surrogates, <= U+10FFFF, no NUL),
// else the problem and its byte offset, e.g. "invalid UTF-8 at byte 17 (0xC3 0x28)".
std::string utf8_problem(const std::string& text);

// Every line of one file, plain or gzip (zlib reads both), normalised and validated; "-" reads
// standard input (named "<stdin>" in messages). Throws std::runtime_error "FILE:LINE: ..." for invalid UTF-8, "cannot read FILE: ..." for a
// missing, unreadable or corrupt (e.g. truncated .gz) file.
std::vector<std::string> read_text_lines(const std::string& path, NormalizationStats* stats = nullptr);

struct ReadOptions {
  int64_t max_pairs = 0;  // read only the first N pairs (0: all); for quick experiments
};

struct ParallelText {
  std::string src_path, tgt_path;  // the files read
  std::vector<std::string> src, tgt;  // line-aligned: pair i is line i+1 of both files
  NormalizationStats src_stats, tgt_stats;
};

// Reads PREFIX.SRC and PREFIX.TGT (each plain or .gz). Nothing is dropped here, so pair i
// stays line i+1 (empty and overlong pairs are removed by filter_pairs after encoding).
// Throws std::runtime_error naming both files and both counts when the line counts differ.
ParallelText read_parallel(const std::string& prefix, const std::string& src_lang,
                           const std::string& tgt_lang, const ReadOptions& options = {});

// Which encoded pairs training keeps; lengths count the </s> each side gets (n+1, m+1),
// as fairseq's --max-positions does, so every kept pair fits the positional table.
struct FilterOptions {
  int64_t max_positions = 1024;  // drop pairs with n+1 or m+1 above this (fairseq's default)
  double max_length_ratio = 0;   // drop pairs with max(n,m)/min(n,m) above this (0: off)
  bool drop_empty = true;        // drop pairs with an empty side (n == 0 or m == 0)
  std::vector<std::string> validate() const;  // every problem, empty when fine
};

struct FilterResult {
  std::vector<int64_t> kept;  // indices of the kept pairs, ascending
  int64_t empty = 0;          // dropped: a side has no tokens
  int64_t too_long = 0;       // dropped: longer than max_positions (with </s>)
  int64_t bad_ratio = 0;      // dropped: length ratio above max_length_ratio
  int64_t dropped() const { return empty + too_long + bad_ratio; }
};

// Applies `options` to pairs of id sequences (no special tokens); each dropped pair is
// counted under the first reason that applies, in the order above. Never truncates.
// Throws std::invalid_argument for invalid options or sequences of different counts.
FilterResult filter_pairs(const std::vector<Sentence>& src, const std::vector<Sentence>& tgt,
                          const FilterOptions& options);

}  // namespace normlab::data
