#include "data/vocab.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "core/file_io.h"
#include "core/problems.h"
#include "core/tokens.h"
#include "data/corpus.h"
#include "data/text_stream.h"

namespace normlab::data {
namespace {

// Feeds SentencePiece's trainer from memory, so that it reads exactly the normalised text.
class VectorIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorIterator(const std::vector<std::string>& sentences) : sentences_(sentences) { skip_empty(); }
  bool done() const override { return i_ >= sentences_.size(); }
  void Next() override { ++i_; skip_empty(); }
  const std::string& value() const override { return sentences_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void skip_empty() { while (i_ < sentences_.size() && sentences_[i_].empty()) ++i_; }
  const std::vector<std::string>& sentences_;
  size_t i_ = 0;
};

// SentencePiece's status text without its source location ("./src/x.cc(42) [check] text").
std::string spm_message(const sentencepiece::util::Status& status) {
  std::string text = status.message();
  const auto end_of_check = text.rfind("] ");
  if (end_of_check != std::string::npos && end_of_check + 2 < text.size()) text = text.substr(end_of_check + 2);
  return text.empty() ? status.ToString() : text;
}

}  // namespace

std::vector<std::string> VocabTrainOptions::validate() const {
  std::vector<std::string> problems;
  if (vocab_size <= kNumSpecialTokens)
    problems.push_back("--vocab-size must be > " + std::to_string(kNumSpecialTokens) +
                       " (the special tokens), got " + std::to_string(vocab_size));
  if (!(character_coverage > 0 && character_coverage <= 1))
    problems.push_back("--character-coverage must be in (0, 1], got " + std::to_string(character_coverage));
  if (max_sentence_bytes <= 0)
    problems.push_back("max_sentence_bytes must be positive, got " + std::to_string(max_sentence_bytes));
  return problems;
}

Vocab::Vocab() : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
Vocab::Vocab(Vocab&&) noexcept = default;
Vocab& Vocab::operator=(Vocab&&) noexcept = default;
Vocab::~Vocab() = default;

Vocab Vocab::from_bytes(const std::string& bytes, const std::string& what) {
  Vocab vocab;
  const auto status = vocab.sp_->LoadFromSerializedProto(bytes);
  if (!status.ok())
    throw std::runtime_error(what + ": not a SentencePiece model (cannot parse it)");
  const auto& sp = *vocab.sp_;
  if (sp.bos_id() != kBos || sp.pad_id() != kPad || sp.eos_id() != kEos || sp.unk_id() != kUnk)
    throw std::runtime_error(what + ": special ids are bos " + std::to_string(sp.bos_id()) + ", pad " +
                             std::to_string(sp.pad_id()) + ", eos " + std::to_string(sp.eos_id()) +
                             ", unk " + std::to_string(sp.unk_id()) +
                             "; normlab needs fairseq's 0, 1, 2, 3 (train it with `normlab bpe train`)");
  vocab.bytes_ = bytes;
  return vocab;
}

Vocab Vocab::load(const std::string& model_path) {
  const auto bytes = core::read_file(model_path);
  return from_bytes(std::string(bytes.begin(), bytes.end()), model_path);
}

int64_t Vocab::size() const { return sp_->GetPieceSize(); }

Sentence Vocab::encode(const std::string& text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  if (!status.ok()) throw std::runtime_error("SentencePiece cannot encode: " + spm_message(status));
  return Sentence(ids.begin(), ids.end());
}

std::vector<std::string> Vocab::encode_pieces(const std::string& text) const {
  std::vector<std::string> pieces;
  const auto status = sp_->Encode(text, &pieces);
  if (!status.ok()) throw std::runtime_error("SentencePiece cannot encode: " + spm_message(status));
  return pieces;
}

std::string Vocab::decode(const Sentence& ids) const {
  std::vector<int> kept;
  kept.reserve(ids.size());
  for (const auto id : ids) {
    if (id < 0 || id >= size())
      throw std::invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary of " +
                                  std::to_string(size()));
    if (id != kBos && id != kPad && id != kEos) kept.push_back(static_cast<int>(id));
  }
  std::string text;
  const auto status = sp_->Decode(kept, &text);
  if (!status.ok()) throw std::runtime_error("SentencePiece cannot decode: " + spm_message(status));
  return text;
}

std::string Vocab::decode_pieces(const std::vector<std::string>& pieces) const {
  std::string text;
  const auto status = sp_->Decode(pieces, &text);
  if (!status.ok()) throw std::runtime_error("SentencePiece cannot decode: " + spm_message(status));
  return text;
}

std::string Vocab::piece(int64_t id) const {
  if (id < 0 || id >= size())
    throw std::invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary of " +
                                std::to_string(size()));
  return sp_->IdToPiece(static_cast<int>(id));
}

double Vocab::score(int64_t id) const {
  piece(id);  // range check
  return sp_->GetScore(static_cast<int>(id));
}

int64_t Vocab::id(const std::string& piece) const { return sp_->PieceToId(piece); }

std::string train_vocab(const std::vector<std::string>& sentences, const VocabTrainOptions& options) {
  core::throw_if_problems(options.validate());
  // identity normalisation: read_parallel already normalised white space, and without NFKC
  // decode(encode(x)) == x for every piece-covered x. One thread and a fixed seed keep
  // training deterministic (checked by tests/data/vocab_test.cpp).
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"character_coverage", std::to_string(options.character_coverage)},
      {"bos_id", std::to_string(kBos)},
      {"pad_id", std::to_string(kPad)},
      {"eos_id", std::to_string(kEos)},
      {"unk_id", std::to_string(kUnk)},
      {"normalization_rule_name", "identity"},
      {"max_sentence_length", std::to_string(options.max_sentence_bytes)},
      {"input_sentence_size", "0"},  // all sentences, no sampling
      {"shuffle_input_sentence", "false"},
      {"num_threads", "1"},
      {"minloglevel", "2"},  // SentencePiece's progress lines would flood stderr
  };
  sentencepiece::SetRandomGeneratorSeed(options.seed);
  VectorIterator it(sentences);
  if (it.done()) throw std::invalid_argument("no training text: every sentence is empty");
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &model);
  if (!status.ok())
    throw std::runtime_error("SentencePiece training failed: " + spm_message(status));
  return model;
}

std::string train_vocab_on_data(const std::string& prefix, bool running_text, const std::string& src_lang,
                                const std::string& tgt_lang, const VocabTrainOptions& options) {
  if (running_text) return train_vocab(read_text_for_vocab(prefix), options);
  auto text = read_parallel(prefix, src_lang, tgt_lang);
  std::vector<std::string> sentences = std::move(text.src);
  sentences.insert(sentences.end(), text.tgt.begin(), text.tgt.end());
  return train_vocab(sentences, options);
}

std::string save_vocab(const std::string& model_bytes, const std::string& dir) {
  const auto vocab = Vocab::from_bytes(model_bytes, "trained model");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create " + dir + ": " + ec.message());
  const auto path = (std::filesystem::path(dir) / kVocabModelFile).string();
  core::write_file_atomic(path, model_bytes);
  std::ostringstream list;
  for (int64_t id = 0; id < vocab.size(); ++id)
    list << vocab.piece(id) << '\t' << vocab.score(id) << '\n';
  core::write_file_atomic((std::filesystem::path(dir) / kVocabListFile).string(), list.str());
  return path;
}

std::vector<Sentence> encode_all(const Vocab& vocab, const std::vector<std::string>& sentences) {
  std::vector<Sentence> out;
  out.reserve(sentences.size());
  for (const auto& s : sentences) out.push_back(vocab.encode(s));
  return out;
}

}  // namespace normlab::data
