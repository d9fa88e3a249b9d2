#include "decode_options.h"

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>

#include "option_cli.h"

namespace normlab::app {

// Each range is checked as the option is parsed, used or not (train without --eval-bleu); what
// relates options (--nbest and --beam, --min-len and the lengths) is BeamSearchConfig::validate().
void add_beam_options(CLI::App& cmd, decode::BeamSearchConfig& c, bool translate, const std::string& group) {
  auto add = [&](const std::string& flag, auto& field, const std::string& help, const core::Range& range) {
    cmd.add_option(flag, field, help)->capture_default_str()->check(in_range(range))->group(group);
  };
  add("--beam", c.beam, "beam size (1: greedy)", core::at_least(1));
  core::Range any_finite;
  any_finite.finite = true;
  any_finite.phrase = "finite";
  add("--lenpen", c.lenpen, "length penalty: score = sum(log p) / len^lenpen", any_finite);
  add("--max-len-a", c.max_len_a, "max output length = a * source length + b", core::finite(core::at_least(0)));
  add("--max-len-b", c.max_len_b, "max output length = a * source length + b", core::at_least(0));
  if (!translate) return;
  add("--nbest", c.nbest, "hypotheses printed per sentence, best first", core::at_least(1));
  add("--min-len", c.min_len, "no </s> before this many output tokens (fairseq's --min-len)", core::at_least(0));
}

namespace {

std::filesystem::path run_vocab(const std::string& checkpoint) {
  return std::filesystem::path(checkpoint).parent_path().parent_path() / "vocab" / data::kVocabModelFile;
}

}  // namespace

std::optional<data::Vocab> checkpoint_own_vocab(const model::LoadedModel& loaded, const std::string& checkpoint,
                                                std::string& source) {
  auto stored = loaded.extra_tensors.find(model::kVocabTensor);
  if (stored != loaded.extra_tensors.end()) {
    source = checkpoint + ":" + model::kVocabTensor;
    return data::Vocab::from_bytes(model::tensor_bytes(stored->second), source);
  }
  if (!std::filesystem::exists(run_vocab(checkpoint))) return std::nullopt;
  source = run_vocab(checkpoint).string();
  return data::Vocab::load(source);
}

void check_vocab_size(const data::Vocab& vocab, const model::LoadedModel& loaded, const std::string& checkpoint) {
  const auto& c = loaded.model->config();
  const auto expected = model::model_vocab_size(c.kind, vocab.size());  // an encoder-only model's <mask> after it
  if (expected != c.src_vocab_size || expected != c.tgt_vocab_size)
    throw std::invalid_argument("the vocabulary has " + std::to_string(vocab.size()) + " pieces but " + checkpoint +
                                " was built for " + std::to_string(c.src_vocab_size) + " (source) and " +
                                std::to_string(c.tgt_vocab_size) + " (target)" +
                                (expected != vocab.size() ? " (with <mask> after the pieces)" : ""));
}

data::Vocab checkpoint_vocab(const model::LoadedModel& loaded, const std::string& checkpoint,
                             const std::string& vocab_path) {
  std::string source;
  auto vocab = vocab_path.empty() ? checkpoint_own_vocab(loaded, checkpoint, source) : data::Vocab::load(vocab_path);
  if (!vocab)
    throw std::invalid_argument(checkpoint + " holds no vocabulary and " + run_vocab(checkpoint).string() +
                                " does not exist; pass --vocab SPM_MODEL");
  check_vocab_size(*vocab, loaded, checkpoint);
  return std::move(*vocab);
}

std::function<void(size_t, size_t)> progress_printer(const std::string& name) {
  using Clock = std::chrono::steady_clock;
  auto last = std::make_shared<Clock::time_point>(Clock::now());
  return [name, last](size_t done, size_t total) {
    if (done < total && Clock::now() - *last < std::chrono::seconds(10)) return;
    *last = Clock::now();
    std::cerr << "normlab " << name << ": " << done << "/" << total << " sentences\n";
  };
}

}  // namespace normlab::app
