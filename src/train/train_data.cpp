#include "train/train_data.h"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "data/batching.h"
#include "data/cache.h"
#include "data/corpus.h"
#include "data/text_stream.h"
#include "train/train_config.h"

namespace normlab::train {

Corpus load_corpus(const std::string& prefix, const TrainConfig& c, const data::Vocab& vocab,
                   const std::string& cache_dir, bool training, const std::function<void(const std::string&)>& log) {
  if (!c.model.has_encoder()) return load_text_corpus(prefix, vocab, c.text_block_size(), log);
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
                        const std::function<void(const std::string&)>& log) {
  const auto stream = data::encode_text(path, vocab);
  Corpus corpus;
  corpus.files = {path};
  corpus.layout = data::Layout::kBlocks;
  corpus.tgt = data::cut_blocks(stream, block_size);
  corpus.src.resize(corpus.tgt.size());
  corpus.sizes = data::example_sizes(corpus.src, corpus.tgt, corpus.layout);
  corpus.kept.resize(corpus.tgt.size());
  std::iota(corpus.kept.begin(), corpus.kept.end(), 0);
  const auto predicted = static_cast<int64_t>(corpus.tgt.size()) * block_size;
  std::ostringstream s;
  s << path << ": " << stream.tokens.size() << " tokens from " << stream.lines << " lines (" << stream.blank_lines
    << " blank, " << stream.lines_changed << " with white space normalised), " << corpus.tgt.size()
    << " blocks of " << block_size << " positions (" << static_cast<int64_t>(stream.tokens.size()) - 1 - predicted
    << " tokens after the last block left out)";
  log(s.str());
  return corpus;
}

data::Batch gather(const Corpus& corpus, const std::vector<int64_t>& indices) {
  return data::gather_batch(corpus.src, corpus.tgt, indices, corpus.layout);
}

}  // namespace normlab::train
