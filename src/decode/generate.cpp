#include "decode/generate.h"

#include <ATen/CPUGeneratorImpl.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <torch/torch.h>

#include "core/problems.h"
#include "core/tokens.h"
#include "model/linear.h"

namespace normlab::decode {

std::vector<std::string> GenerateConfig::validate() const {
  std::vector<std::string> p;
  const auto n = [](auto v) { return std::to_string(v); };
  if (search.beam < 1) p.push_back("--beam must be >= 1, got " + n(search.beam));
  if (search.nbest < 1 || search.nbest > search.beam)
    p.push_back("--nbest must be in [1, --beam " + n(search.beam) + "], got " + n(search.nbest));
  if (!std::isfinite(search.lenpen)) p.push_back("--lenpen must be finite");
  if (search.min_len < 0) p.push_back("--min-len must be >= 0, got " + n(search.min_len));
  if (max_new_tokens < 1) p.push_back("--max-new-tokens must be >= 1, got " + n(max_new_tokens));
  if (search.min_len > max_new_tokens)
    p.push_back("--min-len " + n(search.min_len) + " exceeds --max-new-tokens " + n(max_new_tokens));
  if (num_samples < 1) p.push_back("--num-samples must be >= 1, got " + n(num_samples));
  if (!(sampling.temperature > 0) || !std::isfinite(sampling.temperature))
    p.push_back("--temperature must be > 0 and finite");
  if (sampling.top_k < 0) p.push_back("--top-k must be >= 0 (0: every token), got " + n(sampling.top_k));
  if (!(sampling.top_p > 0 && sampling.top_p <= 1)) p.push_back("--top-p must be in (0, 1]");
  if (sampling.enabled && search.beam > 1) p.push_back("--sampling draws one continuation at a time: --beam must be 1");
  if (!sampling.enabled) {
    if (sampling.temperature != 1.0 || sampling.top_k != 0 || sampling.top_p != 1.0)
      p.push_back("--temperature, --top-k and --top-p need --sampling");
    if (num_samples > 1) p.push_back("--num-samples needs --sampling (greedy decoding gives one continuation)");
  }
  if (ignore_eos && search.beam > 1) p.push_back("--ignore-eos: beam search ends every hypothesis with </s>");
  return p;
}

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Prompt indices grouped by length, each group in prompt order: a group decodes together.
std::vector<std::vector<size_t>> same_length_groups(const std::vector<data::Sentence>& prompts) {
  std::map<size_t, std::vector<size_t>> by_length;
  for (size_t i = 0; i < prompts.size(); ++i) by_length[prompts[i].size()].push_back(i);
  std::vector<std::vector<size_t>> groups;
  for (auto& [length, group] : by_length) groups.push_back(std::move(group));
  return groups;
}

// The group's contexts `</s> prompt` (G, L+1): all but the last column fed in one forward pass
// into a new cache of `positions` positions, whose G rows then become G * `copies` (each
// prompt's copies consecutive).
model::DecoderCache prefill(model::DecoderImpl& decoder, const torch::Tensor& context, int64_t positions,
                            int64_t copies) {
  auto cache = decoder.start_decoding(positions);
  decoder.prefill(context.slice(1, 0, context.size(1) - 1), cache);
  if (copies > 1) {
    auto rows = torch::arange(context.size(0), torch::TensorOptions(torch::kLong).device(context.device()));
    cache.reorder(rows.repeat_interleave(copies), {});
  }
  return cache;
}

// Hugging Face's logits processors in their order, on log-probabilities (N,V) float32 with the
// banned tokens at -inf: TemperatureLogitsWarper, TopKLogitsWarper (ties with the k-th kept),
// TopPLogitsWarper (sorted ascending, drop while the cumulative probability <= 1 - top_p, keep
// the most likely token always). Returns the scores whose softmax is drawn from.
torch::Tensor sampling_scores(torch::Tensor scores, const SamplingConfig& config) {
  if (config.temperature != 1.0) scores = scores / config.temperature;
  if (config.top_k > 0 && config.top_k < scores.size(1)) {
    auto kth = std::get<0>(scores.topk(config.top_k, 1)).select(1, config.top_k - 1).unsqueeze(1);
    scores = scores.masked_fill(scores < kth, kNegInf);
  }
  if (config.top_p < 1.0) {
    auto [sorted, order] = scores.sort(1, /*descending=*/false);
    auto remove = sorted.softmax(1).cumsum(1) <= (1.0 - config.top_p);
    remove.select(1, remove.size(1) - 1).fill_(false);
    scores = scores.masked_fill(remove.scatter(1, order, remove), kNegInf);
  }
  return scores;
}

// Greedy decoding or sampling of `copies` continuations of each of the cache's G prompts,
// `first` (G) their last context token. Rows leave the cache as they end.
std::vector<std::vector<Hypothesis>> draw(model::DecoderImpl& decoder, model::DecoderCache& cache,
                                          const torch::Tensor& first, int64_t copies, int64_t max_new,
                                          const GenerateConfig& config, at::Generator& generator) {
  const int64_t G = first.size(0);
  std::vector<Hypothesis> hyps(static_cast<size_t>(G * copies));
  std::vector<int64_t> alive(hyps.size());  // cache row -> hypothesis
  for (size_t i = 0; i < alive.size(); ++i) alive[i] = static_cast<int64_t>(i);
  auto next = first.repeat_interleave(copies).unsqueeze(1);  // (N,1)
  std::vector<bool> finished(hyps.size(), false);
  for (int64_t step = 0; step < max_new && !alive.empty(); ++step) {
    auto logits = decoder.forward_step(next, cache);
    // float32 for bf16/fp16 logits, as the beam search's scores; float64 stays float64.
    auto logp = torch::log_softmax(logits.scalar_type() == torch::kFloat64 ? logits : logits.to(torch::kFloat32), -1);
    std::vector<int64_t> banned = {kBos, kPad, kUnk};
    if (step < config.search.min_len) banned.push_back(kEos);
    logp.index_fill_(1, torch::tensor(banned, torch::kLong).to(logp.device()), kNegInf);
    auto picked = config.sampling.enabled
                      ? torch::multinomial(sampling_scores(logp, config.sampling).cpu().softmax(1), 1, false, generator)
                      : logp.argmax(1, /*keepdim=*/true).cpu();
    auto chosen_logp = logp.cpu().gather(1, picked).to(torch::kFloat64).contiguous();
    picked = picked.contiguous();
    std::vector<int64_t> keep;
    for (size_t r = 0; r < alive.size(); ++r) {
      auto& h = hyps[static_cast<size_t>(alive[r])];
      const int64_t token = picked.data_ptr<int64_t>()[r];
      h.positional_scores.push_back(chosen_logp.data_ptr<double>()[r]);
      if (token == kEos && !config.ignore_eos) continue;  // ended: its </s> scored, not a token
      h.tokens.push_back(token);
      keep.push_back(static_cast<int64_t>(r));
    }
    if (keep.size() < alive.size()) {
      std::vector<int64_t> still;
      for (auto r : keep) still.push_back(alive[static_cast<size_t>(r)]);
      alive = std::move(still);
      if (keep.empty()) break;
      auto rows = torch::tensor(keep, torch::kLong);
      cache.reorder(rows.to(first.device()), {});
      picked = picked.index_select(0, rows);
    }
    next = picked.to(first.device());
  }
  std::vector<std::vector<Hypothesis>> out(static_cast<size_t>(G));
  for (size_t i = 0; i < hyps.size(); ++i) {
    auto& h = hyps[i];
    double sum = 0;
    for (double s : h.positional_scores) sum += s;
    h.score = sum / std::pow(static_cast<double>(h.positional_scores.size()), config.search.lenpen);
    out[i / static_cast<size_t>(copies)].push_back(std::move(h));
  }
  return out;
}

}  // namespace

void check_decodable(const model::ModelConfig& model) {
  if (model.parametrisation == model::Parametrisation::kUmup)
    throw std::invalid_argument("generate: a --parametrisation u-mup model's attention scale depends on the length of "
                                "the whole sequence (unit_scaling's decoder has no incremental decoding): not decoded "
                                "step by step");
}

int64_t new_token_room(const model::ModelConfig& model, int64_t prompt_length, const GenerateConfig& config) {
  // Positions 0..L-1 hold `</s> p_1 .. p_{L-1}`, p_L is fed at L, each new token after it.
  return model.max_positions - prompt_length - (config.search.beam > 1 ? 1 : 0);
}

std::vector<std::vector<Hypothesis>> generate(model::DecoderOnly& model, const std::vector<data::Sentence>& prompts,
                                              const GenerateConfig& config) {
  core::throw_if_problems(config.validate());
  const auto& m = model->config();
  check_decodable(m);
  // fairseq's candidates: min(2 beam, V - 1); fewer than `beam` would break the selection.
  if (config.search.beam > 1 && config.search.beam > m.tgt_vocab_size - 1)
    throw std::invalid_argument("--beam " + std::to_string(config.search.beam) + " needs a vocabulary of more than " +
                                std::to_string(config.search.beam) + " entries");
  const bool was_training = model->is_training();
  model->eval();
  torch::NoGradGuard no_grad;
  auto guard = model->precision_guard();
  model::PackedWeights packed(*model, model->precision());
  auto& decoder = *model->decoder;
  const auto device = model->device();
  const bool beam = config.search.beam > 1;
  const int64_t copies = beam ? config.search.beam : config.num_samples;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(config.sampling.seed);
  std::vector<std::vector<Hypothesis>> out(prompts.size());
  for (const auto& group : same_length_groups(prompts)) {
    const auto length = static_cast<int64_t>(prompts[group.front()].size());
    const int64_t room = new_token_room(m, length, config);
    if (room < std::max<int64_t>(1, config.search.min_len))
      throw std::invalid_argument("prompt " + std::to_string(group.front() + 1) + " has " + std::to_string(length) +
                                  " tokens: the model's max_positions " + std::to_string(m.max_positions) +
                                  " leave no room for --min-len " + std::to_string(config.search.min_len) +
                                  " new tokens");
    const int64_t max_new = std::min(config.max_new_tokens, room);
    std::vector<int64_t> context;
    for (auto i : group) {
      context.push_back(kEos);
      context.insert(context.end(), prompts[i].begin(), prompts[i].end());
    }
    const auto G = static_cast<int64_t>(group.size());
    auto rows = torch::tensor(context, torch::kLong).view({G, length + 1}).to(device);
    auto cache = prefill(decoder, rows, length + max_new + (beam ? 1 : 0), copies);
    auto last = rows.select(1, length);
    std::vector<std::vector<Hypothesis>> hyps;
    if (beam) {
      const auto last_cpu = last.cpu().contiguous();
      const std::vector<int64_t> first(last_cpu.data_ptr<int64_t>(), last_cpu.data_ptr<int64_t>() + G);
      hyps = search(decoder, cache, first, std::vector<int64_t>(group.size(), max_new), config.search);
    } else {
      hyps = draw(decoder, cache, last, copies, max_new, config, generator);
    }
    for (size_t j = 0; j < group.size(); ++j) out[group[j]] = std::move(hyps[j]);
  }
  model->train(was_training);
  return out;
}

}  // namespace normlab::decode
