#include "train/train_data.h"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "core/tokens.h"
#include "data/batching.h"
#include "data/cache.h"
#include "data/classification.h"
#include "data/corpus.h"
#include "data/text_stream.h"
#include "train/train_config.h"

namespace normlab::train {

Corpus load_corpus(const std::string& prefix, const TrainConfig& c, const data::Vocab& vocab,
                   const std::string& cache_dir, bool training, const std::function<void(const std::string&)>& log) {
  if (c.model.kind == model::kDecoderOnly) return load_text_corpus(prefix, vocab, c.text_block_size(), log);
  if (c.model.classifier()) return load_classification_corpus(prefix, vocab, c.model, log);
  if (c.model.kind == model::kEncoderOnly) {
    auto corpus = load_text_corpus(prefix, vocab, c.text_block_size(), log, data::Layout::kMaskedBlocks);
    corpus.masking = CorpusMasking{c.masking, mask_tokens(vocab), c.seed};
    return corpus;
  }
  auto loaded = data::load_encoded_corpus(prefix, c.src_lang, c.tgt_lang, vocab, cache_dir);
  log(loaded.message);
  Corpus corpus;
  corpus.files = {loaded.src_path, loaded.tgt_path};
  corpus.src = std::move(loaded.corpus.src);
  corpus.tgt = std::move(loaded.corpus.tgt);
  data::FilterOptions filter;
  filter.max_positions = c.model.max_positions;
  filter.max_length_ratio = training ? c.max_length_ratio : 0.0;
  auto result = data::filter_pairs(corpus.src, corpus.tgt, filter);
  corpus.kept = std::move(result.kept);
  if (training && c.max_pairs > 0)  // --max-pairs: of the first N pairs, those the filter kept
    corpus.kept.erase(std::lower_bound(corpus.kept.begin(), corpus.kept.end(), c.max_pairs), corpus.kept.end());
  corpus.sizes = data::example_sizes(corpus.src, corpus.tgt);
  std::ostringstream s;
  s << prefix << ": " << corpus.kept.size() << " pairs kept of "
    << (training && c.max_pairs > 0 ? std::min<int64_t>(c.max_pairs, static_cast<int64_t>(corpus.src.size()))
                                     : static_cast<int64_t>(corpus.src.size()))
    << (training && c.max_pairs > 0 ? " (--max-pairs)" : "") << " ("
    << result.empty << " empty, " << result.too_long << " longer than --max-positions "
    << c.model.max_positions << ", " << result.bad_ratio << " beyond --max-length-ratio)";
  log(s.str());
  // An empty validation or test set would record NaN losses; an empty training set has no batch.
  if (corpus.kept.empty())
    throw std::invalid_argument(corpus.files[0] + " and " + corpus.files[1] + ": no sentence pair left to " +
                                (training ? "train on" : "score") + " (" + s.str().substr(prefix.size() + 2) + ")");
  return corpus;
}

Corpus load_text_corpus(const std::string& path, const data::Vocab& vocab, int64_t block_size,
                        const std::function<void(const std::string&)>& log, data::Layout layout) {
  const auto stream = data::encode_text(path, vocab);
  Corpus corpus;
  corpus.files = {path};
  corpus.layout = layout;
  const bool masked = layout == data::Layout::kMaskedBlocks;
  auto blocks = masked ? data::cut_masked_blocks(stream, block_size) : data::cut_blocks(stream, block_size);
  const auto count = static_cast<int64_t>(blocks.size());
  (masked ? corpus.src : corpus.tgt) = std::move(blocks);
  (masked ? corpus.tgt : corpus.src).resize(static_cast<size_t>(count));
  corpus.sizes = data::example_sizes(corpus.src, corpus.tgt, corpus.layout);
  corpus.kept.resize(static_cast<size_t>(count));
  std::iota(corpus.kept.begin(), corpus.kept.end(), 0);
  // A causal LM's blocks predict N tokens each after the stream's first; an encoder's hold N - 1.
  const auto used = masked ? count * (block_size - 1) : count * block_size + 1;
  std::ostringstream s;
  s << path << ": " << stream.tokens.size() << " tokens from " << stream.lines << " lines (" << stream.blank_lines
    << " blank, " << stream.lines_changed << " with white space normalised), " << count << " blocks of "
    << block_size << " positions (" << static_cast<int64_t>(stream.tokens.size()) - used
    << " tokens after the last block left out)";
  log(s.str());
  return corpus;
}

namespace {

// <s> A </s> [B </s>] of one example, its texts' white space normalised as text files' lines are.
data::Sentence classifier_input(const data::ClassificationExample& e, const data::Vocab& vocab) {
  data::Sentence row{kBos};
  for (const auto* text : {&e.a, &e.b}) {
    if (text->empty()) continue;
    const auto ids = vocab.encode(data::normalize_whitespace(*text));
    row.insert(row.end(), ids.begin(), ids.end());
    row.push_back(kEos);
  }
  return row;
}

}  // namespace

Corpus load_classification_corpus(const std::string& path, const data::Vocab& vocab, const model::ModelConfig& model,
                                  const std::function<void(const std::string&)>& log) {
  const auto examples = data::read_classification_file(path);
  Corpus corpus;
  corpus.files = {path};
  corpus.layout = data::Layout::kClassify;
  std::vector<int64_t> counts(static_cast<size_t>(model.classes), 0);
  size_t longest = 0;
  for (const auto& e : examples) {
    const auto where = path + ":" + std::to_string(e.line) + ": ";
    if (e.label >= model.classes)
      throw std::invalid_argument(where + "label " + std::to_string(e.label) + ", but the classifier has " +
                                  std::to_string(model.classes) + " classes (--num-classes)");
    auto row = classifier_input(e, vocab);
    if (static_cast<int64_t>(row.size()) > model.max_positions)
      throw std::invalid_argument(where + std::to_string(row.size()) + " tokens (<s> and </s> included), more than " +
                                  "the model's --max-positions " + std::to_string(model.max_positions));
    longest = std::max(longest, row.size());
    ++counts[static_cast<size_t>(e.label)];
    corpus.src.push_back(std::move(row));
    corpus.tgt.push_back({e.label});
  }
  corpus.sizes = data::example_sizes(corpus.src, corpus.tgt, corpus.layout);
  corpus.kept.resize(corpus.src.size());
  std::iota(corpus.kept.begin(), corpus.kept.end(), 0);
  std::ostringstream s;
  s << path << ": " << examples.size() << " examples (" << (examples.front().b.empty() ? "sentences" : "pairs")
    << "; per class";
  for (auto n : counts) s << " " << n;
  s << "), the longest " << longest << " tokens";
  log(s.str());
  return corpus;
}

std::vector<std::string> classification_texts(const std::string& path) {
  std::vector<std::string> texts;
  for (const auto& e : data::read_classification_file(path))
    for (const auto* text : {&e.a, &e.b})
      if (!text->empty()) texts.push_back(data::normalize_whitespace(*text));
  return texts;
}

data::MaskTokens mask_tokens(const data::Vocab& vocab) {
  const auto pieces = static_cast<int64_t>(vocab.size());
  return {model::model_vocab_size(model::kEncoderOnly, pieces) - 1, kNumSpecialTokens, pieces};
}

data::Batch gather(const Corpus& corpus, const std::vector<int64_t>& indices, int64_t epoch) {
  auto batch = data::gather_batch(corpus.src, corpus.tgt, indices, corpus.layout);
  if (corpus.masking)
    data::mask_batch(batch, indices, corpus.masking->config, corpus.masking->tokens, corpus.masking->seed, epoch);
  return batch;
}

}  // namespace normlab::train
