// The joint source/target vocabulary: a SentencePiece BPE model whose special ids are
// fairseq's (bos 0, pad 1, eos 2, unk 3; core/tokens.h). docs/data.md says how it is trained.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/batch.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace normlab::data {

// File names inside the vocabulary folder.
inline constexpr const char* kVocabModelFile = "spm.model";  // the SentencePiece model
inline constexpr const char* kVocabListFile = "spm.vocab";   // "piece<TAB>score" per id, for people

struct VocabTrainOptions {
  int64_t vocab_size = 8000;        // pieces incl. the 4 special tokens (Multi30k default, docs/data.md)
  double character_coverage = 1.0;  // every character of the training text gets a piece
  int64_t max_sentence_bytes = 1 << 16;  // SentencePiece skips longer lines; ours never are
  uint32_t seed = 1;                // SentencePiece's random generator (unused by BPE, set anyway)
  std::vector<std::string> validate() const;  // every problem, empty when fine
};

class Vocab {
 public:
  // Loads a SentencePiece model file; throws std::runtime_error naming it when it is missing
  // or not a model, and when its special ids are not fairseq's.
  static Vocab load(const std::string& model_path);
  // A model from its serialized bytes (`what` names it in errors).
  static Vocab from_bytes(const std::string& bytes, const std::string& what);

  Vocab(Vocab&&) noexcept;
  Vocab& operator=(Vocab&&) noexcept;
  ~Vocab();

  int64_t size() const;
  // Ids of the pieces of `text`; no special tokens added (callers add </s>, conventions.md).
  Sentence encode(const std::string& text) const;
  std::vector<std::string> encode_pieces(const std::string& text) const;
  // Detokenised text; <s>, <pad> and </s> are skipped, <unk> becomes " ⁇ " (SentencePiece's).
  // Throws std::invalid_argument for ids outside [0, size()).
  std::string decode(const Sentence& ids) const;
  std::string decode_pieces(const std::vector<std::string>& pieces) const;
  std::string piece(int64_t id) const;
  double score(int64_t id) const;  // SentencePiece's score (BPE: minus the merge rank)
  int64_t id(const std::string& piece) const;  // unk id for unknown pieces
  const std::string& bytes() const { return bytes_; }  // the serialized model

 private:
  Vocab();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string bytes_;
};

// Trains a joint BPE model on `sentences` (already normalised, e.g. by read_parallel) and
// returns its serialized bytes. Deterministic: the same sentences and options give the same
// bytes. Throws std::invalid_argument for bad options, std::runtime_error when SentencePiece
// fails (e.g. a vocabulary too small for the characters of the text).
std::string train_vocab(const std::vector<std::string>& sentences, const VocabTrainOptions& options);

// The vocabulary `normlab train` trains on its data, and the instruments that train one as it
// does: train_vocab on a parallel corpus's PREFIX.SRC and PREFIX.TGT sentences (read_parallel,
// source sentences first), or with `running_text` on the lines of the text file PREFIX
// (read_text_for_vocab, data/text_stream.h).
std::string train_vocab_on_data(const std::string& prefix, bool running_text, const std::string& src_lang,
                                const std::string& tgt_lang, const VocabTrainOptions& options);

// Writes DIR/spm.model (atomically) and DIR/spm.vocab, creating DIR; returns the model path.
std::string save_vocab(const std::string& model_bytes, const std::string& dir);

// Every sentence encoded (no special tokens).
std::vector<Sentence> encode_all(const Vocab& vocab, const std::vector<std::string>& sentences);

}  // namespace normlab::data
