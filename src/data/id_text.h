// Files of token ids: one sentence per line, space-separated ids, no special tokens.
#pragma once

#include <string>
#include <vector>

#include "data/batch.h"

namespace normlab::data {

// Throws std::runtime_error naming file and line for unreadable files, non-integers, ids that
// are special tokens (0-2) or >= vocab_size.
std::vector<Sentence> read_id_file(const std::string& path, int64_t vocab_size);
// The same for masked-LM labels: -100 (Hugging Face's ignore index) where nothing is predicted,
// read as <pad>.
std::vector<Sentence> read_label_file(const std::string& path, int64_t vocab_size);
// A classifier's targets: one class id in [0, classes) per line (`normlab score`).
std::vector<Sentence> read_class_file(const std::string& path, int64_t classes);

struct SentencePairs {
  std::vector<Sentence> src, tgt;
};
// Both files; throws std::runtime_error naming both when their line counts differ.
SentencePairs read_id_pairs(const std::string& src_path, const std::string& tgt_path,
                            int64_t src_vocab_size, int64_t tgt_vocab_size);

}  // namespace normlab::data
