// `normlab bpe train|encode|decode`: the joint SentencePiece BPE vocabulary (docs/data.md).
#include <chrono>
#include <iostream>
#include <stdexcept>

#include "commands.h"
#include "data/corpus.h"
#include "data/vocab.h"

namespace normlab::app {
namespace {

struct TrainOptions {
  std::string prefix, src, tgt, out;
  data::VocabTrainOptions vocab;
  int64_t max_pairs = 0;
};

void run_train(const TrainOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const auto text = data::read_parallel(o.prefix, o.src, o.tgt, {o.max_pairs});
  std::vector<std::string> sentences = text.src;
  sentences.insert(sentences.end(), text.tgt.begin(), text.tgt.end());
  const auto model = data::train_vocab(sentences, o.vocab);
  const auto path = data::save_vocab(model, o.out);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto changed = text.src_stats.lines_changed + text.tgt_stats.lines_changed;
  std::cerr << "normlab bpe train: " << o.vocab.vocab_size << " pieces from " << text.src.size()
            << " pairs of " << text.src_path << " and " << text.tgt_path << " (" << changed
            << " lines with white space normalised) in " << seconds << " s -> " << path << "\n";
}

// Lines of ids when every field is a non-negative integer (auto), else pieces.
bool is_id_line(const std::string& line) {
  bool digit_seen = false;
  for (const char c : line) {
    if (c == ' ') continue;
    if (c < '0' || c > '9') return false;
    digit_seen = true;
  }
  return digit_seen;
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (start < line.size()) {
    const auto end = line.find(' ', start);
    fields.push_back(line.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return fields;
}

}  // namespace

Runner add_bpe_command(CLI::App& app, const GlobalOptions&) {
  auto* cmd = app.add_subcommand("bpe", "train, apply and undo the joint SentencePiece BPE vocabulary");
  cmd->require_subcommand(1);

  auto t = std::make_shared<TrainOptions>();
  auto* train = cmd->add_subcommand("train", "train a joint BPE model on PREFIX.SRC and PREFIX.TGT");
  train->add_option("--train", t->prefix, "training text: PREFIX.SRC and PREFIX.TGT, plain or .gz")->required();
  train->add_option("--src", t->src, "source language suffix, e.g. de")->required();
  train->add_option("--tgt", t->tgt, "target language suffix, e.g. en")->required();
  train->add_option("--vocab-size", t->vocab.vocab_size, "pieces including the 4 special tokens")
      ->capture_default_str();
  train->add_option("--character-coverage", t->vocab.character_coverage,
                    "share of characters covered by single pieces")
      ->capture_default_str();
  train->add_option("--max-pairs", t->max_pairs, "train on the first N pairs only (0: all)")
      ->capture_default_str();
  train->add_option("--out", t->out, "folder for spm.model and spm.vocab (created)")->required();

  struct CodeOptions {
    std::string model, input = "-", format = "auto";
    bool ids = false;
  };
  auto e = std::make_shared<CodeOptions>();
  auto* encode = cmd->add_subcommand("encode", "text -> pieces (or ids), one sentence a line");
  encode->add_option("--model", e->model, "SentencePiece model (spm.model)")->required();
  encode->add_option("--input", e->input, "text file, plain or .gz; - reads stdin")->capture_default_str();
  encode->add_flag("--ids", e->ids, "print token ids instead of pieces");

  auto d = std::make_shared<CodeOptions>();
  auto* decode = cmd->add_subcommand("decode", "ids or pieces -> detokenised text, one sentence a line");
  decode->add_option("--model", d->model, "SentencePiece model (spm.model)")->required();
  decode->add_option("--input", d->input, "ids or pieces, space-separated; - reads stdin")->capture_default_str();
  decode->add_option("--format", d->format, "auto|ids|pieces (auto: a line of integers is ids)")
      ->capture_default_str();

  return [=] {
    if (train->parsed()) return run_train(*t);
    if (encode->parsed()) {
      const auto vocab = data::Vocab::load(e->model);
      for (const auto& line : data::read_text_lines(e->input)) {
        std::string out;
        if (e->ids) {
          for (const auto id : vocab.encode(line)) out += (out.empty() ? "" : " ") + std::to_string(id);
        } else {
          for (const auto& piece : vocab.encode_pieces(line)) out += (out.empty() ? "" : " ") + piece;
        }
        std::cout << out << '\n';
      }
      return;
    }
    if (d->format != "auto" && d->format != "ids" && d->format != "pieces")
      throw std::invalid_argument("--format must be auto, ids or pieces, got '" + d->format + "'");
    const auto vocab = data::Vocab::load(d->model);
    const auto lines = data::read_text_lines(d->input);
    const std::string name = d->input == "-" ? "<stdin>" : d->input;
    // Everything is checked before anything is printed: bad input leaves no partial output.
    std::vector<std::string> out;
    out.reserve(lines.size());
    for (size_t i = 0; i < lines.size(); ++i) {
      const auto fields = split(lines[i]);
      const bool ids = d->format == "ids" || (d->format == "auto" && is_id_line(lines[i]));
      if (!ids) {
        out.push_back(vocab.decode_pieces(fields));
        continue;
      }
      const auto where = name + ":" + std::to_string(i + 1) + ": ";
      data::Sentence sentence;
      for (const auto& f : fields) {
        size_t used = 0;
        long long id = -1;
        try {
          id = std::stoll(f, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != f.size() || id < 0) throw std::invalid_argument(where + "expected a token id, found '" + f + "'");
        if (id >= vocab.size())
          throw std::invalid_argument(where + "token id " + f + " is outside the vocabulary of " +
                                      std::to_string(vocab.size()));
        sentence.push_back(id);
      }
      out.push_back(vocab.decode(sentence));
    }
    for (const auto& line : out) std::cout << line << '\n';
  };
}

}  // namespace normlab::app
