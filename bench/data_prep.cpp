// Data preparation timed phase by phase on a real corpus: read the text, train the joint BPE
// model, encode both sides, write the cache, load it back, make one epoch of batches.
// Prints one JSON line (medians over --repeats); the numbers in docs/data.md come from it.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "data/batching.h"
#include "data/cache.h"
#include "data/corpus.h"
#include "data/vocab.h"

using namespace normlab;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"normlab data-preparation benchmark"};
  std::string prefix, src = "de", tgt = "en", work = "data_bench";
  data::VocabTrainOptions vocab_options;
  data::BatchingConfig batching;
  int repeats = 3;
  app.add_option("--train", prefix, "PREFIX of PREFIX.SRC/PREFIX.TGT")->required();
  app.add_option("--src", src)->capture_default_str();
  app.add_option("--tgt", tgt)->capture_default_str();
  app.add_option("--vocab-size", vocab_options.vocab_size)->capture_default_str();
  app.add_option("--max-tokens", batching.max_tokens)->capture_default_str();
  app.add_option("--work", work, "scratch folder (model and cache go here)")->capture_default_str();
  app.add_option("--repeats", repeats)->capture_default_str()->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  std::map<std::string, std::vector<double>> t;
  nlohmann::json stats;
  for (int r = 0; r < repeats; ++r) {
    std::filesystem::remove_all(work);
    auto start = std::chrono::steady_clock::now();
    const auto text = data::read_parallel(prefix, src, tgt);
    t["read_text_s"].push_back(seconds_since(start));

    start = std::chrono::steady_clock::now();
    auto sentences = text.src;
    sentences.insert(sentences.end(), text.tgt.begin(), text.tgt.end());
    const auto model_path = data::save_vocab(data::train_vocab(sentences, vocab_options), work + "/vocab");
    t["train_bpe_s"].push_back(seconds_since(start));
    const auto vocab = data::Vocab::load(model_path);

    start = std::chrono::steady_clock::now();
    const auto src_ids = data::encode_all(vocab, text.src);
    const auto tgt_ids = data::encode_all(vocab, text.tgt);
    t["encode_s"].push_back(seconds_since(start));

    // Miss (read + encode + write) and hit (hash the inputs + load), as training sees them.
    start = std::chrono::steady_clock::now();
    const auto miss = data::load_encoded_corpus(prefix, src, tgt, vocab, work + "/cache");
    t["cache_miss_total_s"].push_back(seconds_since(start));
    start = std::chrono::steady_clock::now();
    const auto hit = data::load_encoded_corpus(prefix, src, tgt, vocab, work + "/cache");
    t["cache_hit_total_s"].push_back(seconds_since(start));
    if (miss.from_cache || !hit.from_cache || hit.corpus.src != src_ids || hit.corpus.tgt != tgt_ids) {
      std::cerr << "cache did not behave: " << miss.message << " / " << hit.message << "\n";
      return 1;
    }

    start = std::chrono::steady_clock::now();
    const auto kept = data::filter_pairs(src_ids, tgt_ids, data::FilterOptions{});
    const auto sizes = data::example_sizes(src_ids, tgt_ids);
    const auto batches = data::make_batches(sizes, kept.kept, batching, 1, 1);
    t["filter_and_batch_s"].push_back(seconds_since(start));

    int64_t src_tokens = 0, tgt_tokens = 0, padded = 0, real = 0;
    for (size_t i = 0; i < src_ids.size(); ++i) {
      src_tokens += static_cast<int64_t>(src_ids[i].size());
      tgt_tokens += static_cast<int64_t>(tgt_ids[i].size());
    }
    for (const auto& b : batches) {
      int64_t largest = 0;
      for (const auto i : b) {
        largest = std::max(largest, sizes[static_cast<size_t>(i)]);
        real += sizes[static_cast<size_t>(i)];
      }
      padded += largest * static_cast<int64_t>(b.size());
    }
    stats = {{"pairs", src_ids.size()},
             {"vocab_size", vocab.size()},
             {"src_tokens_per_sentence", static_cast<double>(src_tokens) / static_cast<double>(src_ids.size())},
             {"tgt_tokens_per_sentence", static_cast<double>(tgt_tokens) / static_cast<double>(tgt_ids.size())},
             {"dropped", kept.dropped()},
             {"batches", batches.size()},
             {"max_tokens", batching.max_tokens},
             {"size_tokens_over_padded", static_cast<double>(real) / static_cast<double>(padded)},
             {"model_bytes", vocab.bytes().size()},
             {"cache_bytes", std::filesystem::file_size(miss.cache_file)}};
  }
  for (const auto& [name, values] : t) stats[name] = median(values);
  stats["repeats"] = repeats;
  std::cout << stats.dump() << "\n";
  return 0;
}
