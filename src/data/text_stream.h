// Running text as a language model reads it (docs/data.md, "Text for language models"): one
// token stream over a whole file, each line's pieces followed by </s> (so a blank line, which
// ends a paragraph or a document in `normlab lm-data`'s files, is a </s> of its own), cut into
// contiguous blocks across line and document boundaries as nanoGPT and Hugging Face's run_clm
// do. No torch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/vocab.h"

namespace normlab::data {

struct TextStream {
  std::string path;
  std::vector<int64_t> tokens;  // every line's ids then </s>
  int64_t lines = 0;            // lines read
  int64_t blank_lines = 0;      // of which blank (a </s> alone)
  int64_t lines_changed = 0;    // lines whose white space was normalised (corpus.h)
};

// The non-blank lines of a text file (plain or gzip), normalised as read_text_lines does: what
// the vocabulary is trained on. Throws std::runtime_error naming the file (corpus.h), and when
// it has no non-blank line.
std::vector<std::string> read_text_for_vocab(const std::string& path);

// The file as one stream. Throws std::runtime_error naming the file when it cannot be read or
// has no non-blank line.
TextStream encode_text(const std::string& path, const Vocab& vocab);

// Blocks of block_size + 1 tokens starting at 0, N, 2N, ... (N = block_size): block i holds
// tokens iN .. iN+N, so that every token but the first is predicted exactly once; the tokens after
// the last whole block are left out (at most N - 1 predictions, as run_clm's group_texts drops
// its remainder). Throws std::invalid_argument naming the file and --block-size when the stream
// has fewer than N + 1 tokens, or N < 1.
std::vector<Sentence> cut_blocks(const TextStream& stream, int64_t block_size);

// An encoder's blocks for masked-LM (RoBERTa's FULL-SENTENCES: contiguous text across line and
// document boundaries, <s> first): <s> then block_size - 1 tokens, starting at 0, N-1, 2(N-1), ...
// (N = block_size), so that every token is in exactly one block; the tokens after the last whole
// block are left out. Throws std::invalid_argument naming the file and --block-size when the stream
// has fewer than N - 1 tokens, or N < 2.
std::vector<Sentence> cut_masked_blocks(const TextStream& stream, int64_t block_size);

}  // namespace normlab::data
