#include "data/text_stream.h"

#include <stdexcept>

#include "core/tokens.h"
#include "data/corpus.h"

namespace normlab::data {
namespace {

bool blank(const std::string& line) { return line.empty(); }  // lines are normalised: trimmed

void refuse_blank_file(const std::string& path, size_t lines) {
  throw std::runtime_error(path + ": no text to model (" + std::to_string(lines) + " lines, none with text)");
}

}  // namespace

std::vector<std::string> read_text_for_vocab(const std::string& path) {
  const auto lines = read_text_lines(path);
  std::vector<std::string> text;
  for (const auto& line : lines)
    if (!blank(line)) text.push_back(line);
  if (text.empty()) refuse_blank_file(path, lines.size());
  return text;
}

TextStream encode_text(const std::string& path, const Vocab& vocab) {
  NormalizationStats stats;
  const auto lines = read_text_lines(path, &stats);
  TextStream stream;
  stream.path = path;
  stream.lines = static_cast<int64_t>(lines.size());
  stream.lines_changed = stats.lines_changed;
  for (const auto& line : lines) {
    if (blank(line)) {
      ++stream.blank_lines;
    } else {
      const auto ids = vocab.encode(line);
      stream.tokens.insert(stream.tokens.end(), ids.begin(), ids.end());
    }
    stream.tokens.push_back(kEos);
  }
  if (stream.blank_lines == stream.lines) refuse_blank_file(path, lines.size());
  return stream;
}

std::vector<Sentence> cut_blocks(const TextStream& stream, int64_t block_size) {
  if (block_size < 1) throw std::invalid_argument("--block-size must be positive, got " + std::to_string(block_size));
  const auto total = static_cast<int64_t>(stream.tokens.size());
  if (total < block_size + 1)
    throw std::invalid_argument(stream.path + ": " + std::to_string(total) + " tokens, fewer than --block-size " +
                                std::to_string(block_size) + " + 1 (one block)");
  std::vector<Sentence> blocks;
  for (int64_t start = 0; start + block_size < total; start += block_size)
    blocks.emplace_back(stream.tokens.begin() + start, stream.tokens.begin() + start + block_size + 1);
  return blocks;
}

std::vector<Sentence> cut_masked_blocks(const TextStream& stream, int64_t block_size) {
  if (block_size < 2)
    throw std::invalid_argument("--block-size must be at least 2 for a masked LM (<s> and a token), got " +
                                std::to_string(block_size));
  const int64_t text = block_size - 1;
  const auto total = static_cast<int64_t>(stream.tokens.size());
  if (total < text)
    throw std::invalid_argument(stream.path + ": " + std::to_string(total) + " tokens, fewer than --block-size " +
                                std::to_string(block_size) + " - 1 (one block after <s>)");
  std::vector<Sentence> blocks;
  for (int64_t start = 0; start + text <= total; start += text) {
    Sentence block{kBos};
    block.insert(block.end(), stream.tokens.begin() + start, stream.tokens.begin() + start + text);
    blocks.push_back(std::move(block));
  }
  return blocks;
}

}  // namespace normlab::data
