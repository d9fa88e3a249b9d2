#include "data/id_text.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/tokens.h"

namespace normlab::data {

namespace {

constexpr int64_t kIgnoreLabel = -100;  // Hugging Face's ignore_index for masked-LM labels

// What a file's lines hold: token ids (read_id_file), masked-LM labels (read_label_file: -100 read
// as <pad>), one class id (read_class_file: 0, 1 and 2 are classes there, not special tokens).
enum class IdKind { kTokens, kMaskedLabels, kClass };

std::vector<Sentence> read_ids(const std::string& path, int64_t vocab_size, IdKind kind) {
  const bool labels = kind == IdKind::kMaskedLabels;
  std::error_code ec;  // an ifstream opens a directory, then throws mid-read
  if (std::filesystem::is_directory(path, ec)) throw std::runtime_error("cannot read " + path + ": it is a directory");
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
  std::vector<Sentence> out;
  std::string line;
  for (size_t line_no = 1; std::getline(in, line); ++line_no) {
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    std::istringstream fields(line);
    Sentence ids;
    for (std::string field; fields >> field;) {
      size_t used = 0;
      int64_t id = -1;
      try {
        id = std::stoll(field, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (labels && used == field.size() && id == kIgnoreLabel) {
        ids.push_back(kPad);
        continue;
      }
      if (used != field.size() || id < 0)
        throw std::runtime_error(where + "expected non-negative integer token ids, found '" + field + "'");
      if (kind != IdKind::kClass && (id == kBos || id == kPad || id == kEos))
        throw std::runtime_error(where + "id " + field +
                                 " is a special token (0 <s>, 1 <pad>, 2 </s>); lines hold sentences without them");
      if (id >= vocab_size)
        throw std::runtime_error(where + "id " + field + " is outside the vocabulary of " +
                                 std::to_string(vocab_size));
      ids.push_back(id);
    }
    if (kind == IdKind::kClass && ids.size() != 1)
      throw std::runtime_error(where + "expected one class id, found " + std::to_string(ids.size()) + " ids");
    out.push_back(std::move(ids));
  }
  if (in.bad()) throw std::runtime_error("cannot read " + path + ": read error");
  return out;
}

}  // namespace

std::vector<Sentence> read_id_file(const std::string& path, int64_t vocab_size) {
  return read_ids(path, vocab_size, IdKind::kTokens);
}

std::vector<Sentence> read_label_file(const std::string& path, int64_t vocab_size) {
  return read_ids(path, vocab_size, IdKind::kMaskedLabels);
}

std::vector<Sentence> read_class_file(const std::string& path, int64_t classes) {
  return read_ids(path, classes, IdKind::kClass);
}

SentencePairs read_id_pairs(const std::string& src_path, const std::string& tgt_path,
                            int64_t src_vocab_size, int64_t tgt_vocab_size) {
  SentencePairs pairs{read_id_file(src_path, src_vocab_size), read_id_file(tgt_path, tgt_vocab_size)};
  if (pairs.src.size() != pairs.tgt.size())
    throw std::runtime_error(src_path + " has " + std::to_string(pairs.src.size()) + " lines but " +
                             tgt_path + " has " + std::to_string(pairs.tgt.size()));
  return pairs;
}

}  // namespace normlab::data
