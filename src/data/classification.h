// Sentence and sentence-pair classification examples in a TSV file (docs/data.md, "Downstream
// tasks"): one example a line, `LABEL<TAB>A` (single sentence) or `LABEL<TAB>A<TAB>B` (pair),
// LABEL a class id 0..K-1 in decimal, UTF-8, no header. No torch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace normlab::data {

struct ClassificationExample {
  int64_t label = 0;
  std::string a, b;  // b empty: a single-sentence example
  int64_t line = 0;  // 1-based line in its file (for messages)
};

// Reads every example; a final line without "\n" is read too; a "\r\n" ending is accepted. Throws
// std::invalid_argument with one line "PATH:LINE: <what>" for: a blank line, a line without a TAB,
// a label that is empty, not a non-negative decimal integer or out of int64 range, more than 3
// fields, an empty text field, invalid UTF-8 (data/corpus.h's utf8_problem), a line whose field
// count differs from line 1's ("2 fields but line 1 has 3"); "PATH: cannot read" for a missing or
// unreadable file and "PATH: no examples" for a file without one.
std::vector<ClassificationExample> read_classification_file(const std::string& path);

// Writes the examples in that format, atomically (core::write_file_atomic). Throws
// std::invalid_argument naming the example when read_classification_file would not read it back:
// a text holding a TAB, LF or CR, an empty or invalid-UTF-8 text, a negative label, single and
// pair examples mixed; and for no examples at all.
void write_classification_file(const std::string& path, const std::vector<ClassificationExample>& examples);

}  // namespace normlab::data
