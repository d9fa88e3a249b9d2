#include "data/classification.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>

#include "core/file_io.h"
#include "data/corpus.h"

namespace normlab::data {
namespace {

// The whole file; "PATH: cannot read (why)" as std::invalid_argument otherwise.
std::string read_whole(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw std::invalid_argument(path + ": cannot read (a folder)");
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(path + ": cannot read (" + std::strerror(errno ? errno : ENOENT) + ")");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::invalid_argument(path + ": cannot read (read error)");
  return text;
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  size_t start = 0;
  for (size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1)
    fields.push_back(line.substr(start, tab - start));
  fields.push_back(line.substr(start));
  return fields;
}

// A non-negative decimal integer (digits only); the problem otherwise.
std::string parse_label(const std::string& s, int64_t& label) {
  if (s.empty()) return "empty label: expected a non-negative integer before the first TAB";
  label = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return "label '" + s + "' is not a non-negative integer";
    const int64_t digit = c - '0';
    if (label > (std::numeric_limits<int64_t>::max() - digit) / 10) return "label " + s + " is out of range (int64)";
    label = label * 10 + digit;
  }
  return {};
}

// One line (no "\n", CR already cut) as an example; the problem otherwise.
std::string parse_line(const std::string& line, ClassificationExample& ex, size_t& fields_seen) {
  if (line.empty()) return "blank line";
  if (auto problem = utf8_problem(line); !problem.empty()) return problem;
  const auto fields = split_tabs(line);
  fields_seen = fields.size();
  if (fields.size() < 2) return "no label: expected LABEL<TAB>TEXT[<TAB>TEXT]";
  if (fields.size() > 3) return std::to_string(fields.size()) + " fields: expected LABEL<TAB>TEXT[<TAB>TEXT]";
  if (auto problem = parse_label(fields[0], ex.label); !problem.empty()) return problem;
  for (size_t i = 1; i < fields.size(); ++i)
    if (fields[i].empty()) return "empty text in field " + std::to_string(i + 1);
  ex.a = fields[1];
  ex.b = fields.size() == 3 ? fields[2] : std::string();
  return {};
}

// Why a text would not be read back as it is; empty when it would.
std::string text_problem(const std::string& text) {
  if (text.empty()) return "is empty";
  if (text.find_first_of("\t\n\r") != std::string::npos) return "holds a TAB or a line break";
  if (auto problem = utf8_problem(text); !problem.empty()) return "has " + problem;
  return {};
}

// Why read_classification_file would not read `ex` back as it is; empty when it would.
std::string example_problem(const ClassificationExample& ex, bool pair) {
  if (ex.label < 0) return "label " + std::to_string(ex.label) + " is negative";
  if (!pair && !ex.b.empty()) return "a pair, but example 1 is a single sentence";
  if (auto problem = text_problem(ex.a); !problem.empty()) return "text A " + problem;
  if (!pair) return {};
  if (auto problem = text_problem(ex.b); !problem.empty()) return "text B " + problem;
  return {};
}

}  // namespace

std::vector<ClassificationExample> read_classification_file(const std::string& path) {
  const std::string text = read_whole(path);
  std::vector<ClassificationExample> examples;
  size_t first_fields = 0;
  int64_t line_no = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    ClassificationExample ex;
    ex.line = line_no;
    size_t fields = 0;
    const auto where = path + ":" + std::to_string(line_no) + ": ";
    if (auto problem = parse_line(line, ex, fields); !problem.empty()) throw std::invalid_argument(where + problem);
    if (first_fields == 0) first_fields = fields;
    if (fields != first_fields)
      throw std::invalid_argument(where + std::to_string(fields) + " fields but line 1 has " +
                                  std::to_string(first_fields));
    examples.push_back(std::move(ex));
  }
  if (examples.empty()) throw std::invalid_argument(path + ": no examples");
  return examples;
}

void write_classification_file(const std::string& path, const std::vector<ClassificationExample>& examples) {
  if (examples.empty()) throw std::invalid_argument(path + ": no examples to write");
  const bool pair = !examples.front().b.empty();
  std::string text;
  for (size_t i = 0; i < examples.size(); ++i) {
    const auto& ex = examples[i];
    if (auto problem = example_problem(ex, pair); !problem.empty())
      throw std::invalid_argument(path + ": example " + std::to_string(i + 1) + ": " + problem);
    text += std::to_string(ex.label) + '\t' + ex.a;
    if (pair) text += '\t' + ex.b;
    text += '\n';
  }
  core::write_file_atomic(path, text);
}

}  // namespace normlab::data
