#include "decode/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <torch/torch.h>

#include "core/option_table.h"
#include "core/problems.h"
#include "core/tokens.h"
#include "data/batching.h"
#include "model/kernels/beam_log_probs.h"
#include "model/linear.h"

namespace normlab::decode {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

torch::Tensor long_tensor(const std::vector<int64_t>& v, const torch::Device& device) {
  return torch::tensor(v, torch::kInt64).to(device);
}

}  // namespace

std::vector<std::string> BeamSearchConfig::validate() const {
  std::vector<std::string> p;
  if (beam < 1) p.push_back("--beam must be >= 1, got " + std::to_string(beam));
  if (nbest < 1 || nbest > beam)
    p.push_back("--nbest must be in [1, --beam " + std::to_string(beam) + "], got " + std::to_string(nbest));
  if (!std::isfinite(lenpen)) p.push_back("--lenpen must be finite");
  if (!(max_len_a >= 0) || !std::isfinite(max_len_a))
    p.push_back("--max-len-a must be >= 0, got " + std::to_string(max_len_a));
  if (max_len_b < 0) p.push_back("--max-len-b must be >= 0, got " + std::to_string(max_len_b));
  if (min_len < 0) p.push_back("--min-len must be >= 0, got " + std::to_string(min_len));
  // fairseq's SequenceGenerator asserts min_len <= max_len; with --max-len-a 0 every sentence's
  // max_len is --max-len-b, so no translation could end: refuse it instead of printing empty lines.
  if (max_len_a == 0 && min_len > max_len_b)
    p.push_back("--min-len " + std::to_string(min_len) + " exceeds the longest translation allowed, --max-len-b " +
                std::to_string(max_len_b) + " (with --max-len-a 0)");
  return p;
}

namespace {

// What the configuration asks of the model, beyond BeamSearchConfig::validate().
void check_model_fits(const BeamSearchConfig& config, const model::ModelConfig& m) {
  // fairseq: k = min(2 beam, V - 1) candidates; fewer than `beam` would break the selection.
  TORCH_CHECK(m.tgt_vocab_size - 1 >= config.beam, "--beam ", config.beam, " needs a vocabulary of more than ",
              config.beam, " entries");
  if (config.min_len > m.max_positions - 1)
    throw std::invalid_argument("--min-len " + std::to_string(config.min_len) + " exceeds the model's longest output, " +
                                std::to_string(m.max_positions - 1) + " tokens (max_positions - 1)");
}

// max_len per sentence (REFERENCE §3): a * source length (with </s>) + b, capped so that the
// decoder input (max_len + 1 tokens) fits the position table (fairseq's cap). A shortest one
// below --min-len could not end: refused (issue 34: empty lines and exit 0).
std::vector<int64_t> max_lengths(const BeamSearchConfig& config, const torch::Tensor& src_lengths,
                                 int64_t max_positions) {
  std::vector<int64_t> max_len;
  for (const auto src_len : std::vector<int64_t>(src_lengths.data_ptr<int64_t>(),
                                                 src_lengths.data_ptr<int64_t>() + src_lengths.numel())) {
    const double len = config.max_len_a * static_cast<double>(src_len) + static_cast<double>(config.max_len_b);
    max_len.push_back(std::min<int64_t>(static_cast<int64_t>(len), max_positions - 1));
  }
  const auto shortest = std::min_element(max_len.begin(), max_len.end()) - max_len.begin();
  if (config.min_len > max_len[static_cast<size_t>(shortest)])
    throw std::invalid_argument("--min-len " + std::to_string(config.min_len) +
                                " exceeds the longest translation allowed for a source of " +
                                std::to_string(src_lengths[shortest].item<int64_t>()) + " tokens with </s>, " +
                                std::to_string(max_len[static_cast<size_t>(shortest)]) + " (--max-len-a " +
                                core::format_number(config.max_len_a) + ", --max-len-b " +
                                std::to_string(config.max_len_b) + ")");
  return max_len;
}

}  // namespace

std::vector<std::vector<Hypothesis>> beam_search(model::Seq2Seq& model, const torch::Tensor& src,
                                                 const BeamSearchConfig& config) {
  core::throw_if_problems(config.validate());
  check_model_fits(config, model->config());
  const auto n_sentences = static_cast<size_t>(src.size(0));

  const auto max_len = max_lengths(config, src.ne(kPad).sum(1).cpu(), model->config().max_positions);
  const int64_t longest = *std::max_element(max_len.begin(), max_len.end());

  // One guard for the whole search: the weights are cast to bf16/fp16 once, not every step.
  auto guard = model->precision_guard();
  // The linear layers' weights packed once per search, or per translate() (model/linear.h).
  model::PackedWeights packed(*model, model->precision());
  // The encoder runs once, and its keys and values are projected once per sentence (the
  // decoder rows of a sentence's beams read them together).
  auto cache = model->decoder->start_decoding(model->encoder(src), longest + 1);
  return search(*model->decoder, cache, std::vector<int64_t>(n_sentences, kEos), max_len, config);
}

namespace {

// The search's state: B active sentences of `beam` rows each (fairseq's bbsz layout).
struct Beams {
  int64_t beam, bsz;
  torch::TensorOptions long_opts;
  torch::Tensor tokens;           // (B*beam, longest+2): first y_1 y_2 ...
  torch::Tensor scores;           // (B*beam, longest+1) cumulative log-probabilities, model dtype
  torch::Tensor cands_to_ignore;  // (B, beam)
  torch::Tensor bbsz_offsets;     // (B, 1): the first row of each sentence
  std::vector<int64_t> active;    // current row block -> input sentence
};

// One step's best 2*beam continuations of every sentence, (B, K) each.
struct Candidates {
  torch::Tensor scores, indices, beams;
};

// fairseq's BeamSearch.step: the best K of every beam's continuations, log p plus the beam's
// score so far (fp32 under bf16), after fairseq's forbidden outputs (plus <unk> and <s>,
// docs/translate.md), </s> only where a sentence reached max_len and never before min_len.
// At step 0 the beams are equal: only the first one's. A sentence's best K are among its
// beams' best K each, which beam_candidates selects in the pass that computes them.
Candidates next_candidates(Beams& b, const torch::Tensor& logits, int64_t step, int64_t V, int64_t longest,
                           const std::vector<int64_t>& max_len, const BeamSearchConfig& config) {
  const int64_t beam = b.beam, bsz = b.bsz;
  const int64_t K = std::min(2 * beam, (step == 0 ? V : beam * V) - 1), k_row = std::min(K, V);
  std::vector<int64_t> banned = {kBos, kPad, kUnk};
  if (step < config.min_len) banned.push_back(kEos);
  std::vector<uint8_t> eos_only;
  for (int64_t s = 0; s < bsz; ++s)
    if (step >= max_len[b.active[s]]) {
      eos_only.resize(static_cast<size_t>(bsz * beam));
      std::fill_n(eos_only.begin() + s * beam, beam, uint8_t{1});
    }
  auto rows = model::kernels::beam_candidates(logits, step == 0 ? torch::Tensor() : b.scores.select(1, step - 1),
                                              k_row, banned, eos_only, kEos);
  if (!b.scores.defined()) b.scores = torch::zeros({bsz * beam, longest + 1}, rows.values.options());
  auto row_values = rows.values.view({bsz, beam, k_row}), row_ids = rows.ids.view({bsz, beam, k_row});
  if (step == 0) row_values = row_values.slice(1, 0, 1), row_ids = row_ids.slice(1, 0, 1);
  auto [cand_scores, cand_pos] = row_values.reshape({bsz, -1}).topk(K);  // (B,2beam)
  return {cand_scores, row_ids.reshape({bsz, -1}).gather(1, cand_pos), cand_pos.div(k_row, "floor")};
}

// A </s> among the top `beam` candidates finishes that hypothesis (score normalised by
// len^lenpen, len = step + 1 counts the </s>), while its sentence holds fewer than `beam`.
void finish_hypotheses(const Beams& b, const Candidates& c, const torch::Tensor& eos_mask, int64_t step,
                       double lenpen, std::vector<std::vector<Hypothesis>>& finalized) {
  const int64_t beam = b.beam;
  auto top_eos = eos_mask.slice(1, 0, beam);
  auto eos_rows = (c.beams + b.bbsz_offsets).slice(1, 0, beam).masked_select(top_eos);
  if (eos_rows.numel() == 0) return;
  auto eos_scores = c.scores.slice(1, 0, beam).masked_select(top_eos);
  auto hyp_tokens = b.tokens.index_select(0, eos_rows).slice(1, 1, step + 1).cpu().contiguous();
  auto cumulative = b.scores.index_select(0, eos_rows).slice(1, 0, step + 1).clone();
  cumulative.select(1, step).copy_(eos_scores);
  auto positional = cumulative.clone();
  positional.slice(1, 1).sub_(cumulative.slice(1, 0, step));
  positional = positional.to(torch::kCPU, torch::kFloat64).contiguous();
  auto normalised = (eos_scores.to(torch::kFloat64) / std::pow(static_cast<double>(step + 1), lenpen)).cpu();
  auto rows_cpu = eos_rows.cpu();
  for (int64_t i = 0; i < eos_rows.numel(); ++i) {
    auto& hyps = finalized[b.active[rows_cpu[i].item<int64_t>() / beam]];
    if (static_cast<int64_t>(hyps.size()) >= beam) continue;
    Hypothesis h;
    auto t = hyp_tokens[i];
    h.tokens.assign(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + step);
    h.score = normalised[i].item<double>();
    auto ps = positional[i];
    h.positional_scores.assign(ps.data_ptr<double>(), ps.data_ptr<double>() + step + 1);
    hyps.push_back(std::move(h));
  }
}

// The rows of the kept sentences `keep` (indices into the active block) in every tensor that
// is indexed by the active sentences; returns the kept sentences' indices, for the cache.
torch::Tensor keep_sentences(Beams& b, Candidates& c, torch::Tensor& eos_mask, const std::vector<int64_t>& keep) {
  auto batch_idxs = long_tensor(keep, b.tokens.device());
  auto row_keep = ((batch_idxs * b.beam).unsqueeze(1) + torch::arange(b.beam, b.long_opts)).view(-1);
  eos_mask = eos_mask.index_select(0, batch_idxs);
  c.beams = c.beams.index_select(0, batch_idxs);
  c.scores = c.scores.index_select(0, batch_idxs);
  c.indices = c.indices.index_select(0, batch_idxs);
  b.cands_to_ignore = b.cands_to_ignore.index_select(0, batch_idxs);
  b.tokens = b.tokens.index_select(0, row_keep);
  b.scores = b.scores.index_select(0, row_keep);
  std::vector<int64_t> still;
  for (auto s : keep) still.push_back(b.active[s]);
  b.active = std::move(still);
  b.bsz = static_cast<int64_t>(keep.size());
  b.bbsz_offsets = (torch::arange(b.bsz, b.long_opts) * b.beam).unsqueeze(1);
  return batch_idxs;
}

// The next beams: the best `beam` candidates that are not </s> (fairseq's active_mask).
// Returns the beam (within its sentence) each new beam continues, (B, beam).
torch::Tensor advance(Beams& b, const Candidates& c, const torch::Tensor& eos_mask, int64_t step) {
  const int64_t beam = b.beam, cand_size = 2 * beam;
  // </s> candidates, and the beams of sentences already ignored, in a new int64 tensor (the
  // caller's eos_mask stays as it is).
  auto active_mask = eos_mask.to(torch::kInt64);
  active_mask.slice(1, 0, beam).masked_fill_(b.cands_to_ignore, 1);
  active_mask.mul_(cand_size).add_(torch::arange(active_mask.size(1), b.long_opts));
  auto [ignore, active_hypos] = active_mask.topk(beam, 1, /*largest=*/false);
  b.cands_to_ignore = ignore.ge(cand_size);
  auto active_beams = c.beams.gather(1, active_hypos);  // (B,beam)
  auto new_rows = (active_beams + b.bbsz_offsets).view(-1);
  b.tokens = b.tokens.index_select(0, new_rows);
  b.tokens.select(1, step + 1).copy_(c.indices.gather(1, active_hypos).view(-1));
  b.scores = b.scores.index_select(0, new_rows);
  b.scores.select(1, step).copy_(c.scores.gather(1, active_hypos).view(-1));
  return active_beams;
}

}  // namespace

std::vector<std::vector<Hypothesis>> search(model::DecoderImpl& decoder, model::DecoderCache& cache,
                                            const std::vector<int64_t>& first, const std::vector<int64_t>& max_len,
                                            const BeamSearchConfig& config) {
  const int64_t beam = config.beam, V = decoder.output_weight().size(0);
  const auto device = decoder.embed_tokens->weight.device();
  const auto n_sentences = first.size();
  const int64_t longest = *std::max_element(max_len.begin(), max_len.end());
  const auto bsz = static_cast<int64_t>(n_sentences);
  const auto long_opts = torch::TensorOptions().dtype(torch::kInt64).device(device);
  std::vector<int64_t> active(n_sentences);
  for (size_t i = 0; i < n_sentences; ++i) active[i] = static_cast<int64_t>(i);
  Beams b{beam,
          bsz,
          long_opts,
          torch::full({bsz * beam, longest + 2}, kPad, long_opts),
          torch::Tensor(),  // scores: the model's dtype, known at the first step
          torch::zeros({bsz, beam}, long_opts.dtype(torch::kBool)),
          (torch::arange(bsz, long_opts) * beam).unsqueeze(1),
          std::move(active)};
  b.tokens.select(1, 0).copy_(long_tensor(first, device).repeat_interleave(beam));
  std::vector<std::vector<Hypothesis>> finalized(n_sentences);
  std::vector<char> finished(n_sentences, 0);

  for (int64_t step = 0; step <= longest; ++step) {
    auto logits = decoder.forward_step(b.tokens.slice(1, step, step + 1), cache);
    auto c = next_candidates(b, logits, step, V, longest, max_len, config);
    auto eos_mask = c.indices.eq(kEos) & c.scores.ne(kNegInf);
    eos_mask.slice(1, 0, beam).masked_fill_(b.cands_to_ignore, false);
    finish_hypotheses(b, c, eos_mask, step, config.lenpen, finalized);
    // fairseq's early stop: a sentence is done once it has `beam` finished hypotheses (or
    // reached its max_len); done sentences leave the batch.
    std::vector<int64_t> keep;
    for (int64_t s = 0; s < b.bsz; ++s) {
      const auto sent = b.active[s];
      if (static_cast<int64_t>(finalized[sent].size()) >= beam || step >= max_len[sent]) finished[sent] = 1;
      if (!finished[sent]) keep.push_back(s);
    }
    if (keep.empty()) break;
    torch::Tensor old_offsets = b.bbsz_offsets, kept_sentences;
    if (static_cast<int64_t>(keep.size()) < b.bsz) {
      kept_sentences = keep_sentences(b, c, eos_mask, keep);
      old_offsets = (kept_sentences * beam).unsqueeze(1);
    }
    auto active_beams = advance(b, c, eos_mask, step);
    // Greedy keeps every row in place unless sentences left: nothing to reorder then.
    if (beam > 1 || kept_sentences.defined()) cache.reorder((active_beams + old_offsets).view(-1), kept_sentences);
  }

  for (auto& hyps : finalized) {
    std::stable_sort(hyps.begin(), hyps.end(),
                     [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
    if (static_cast<int64_t>(hyps.size()) > config.nbest) hyps.resize(static_cast<size_t>(config.nbest));
  }
  return finalized;
}

std::vector<std::vector<Hypothesis>> translate(model::Seq2Seq& model,
                                               const std::vector<data::Sentence>& sources,
                                               const BeamSearchConfig& config, int64_t max_tokens,
                                               const std::function<void(size_t, size_t)>& progress) {
  core::throw_if_problems(config.validate());
  if (max_tokens < 1) throw std::invalid_argument("--max-tokens must be >= 1, got " + std::to_string(max_tokens));
  const int64_t max_positions = model->config().max_positions;
  std::vector<int64_t> sizes(sources.size()), nonempty;
  for (size_t i = 0; i < sources.size(); ++i) {
    sizes[i] = static_cast<int64_t>(sources[i].size()) + 1;  // with </s>
    if (sources[i].empty()) continue;
    const auto what = "input line " + std::to_string(i + 1) + " has " + std::to_string(sizes[i]) +
                      " tokens with </s>, more than ";
    if (sizes[i] > max_positions)
      throw std::invalid_argument(what + "the model's max_positions " + std::to_string(max_positions));
    if (sizes[i] > max_tokens) throw std::invalid_argument(what + "--max-tokens " + std::to_string(max_tokens));
    nonempty.push_back(static_cast<int64_t>(i));
  }
  data::BatchingConfig batching;
  batching.max_tokens = max_tokens;
  const auto batches = data::make_batches(sizes, nonempty, batching, /*seed=*/1, /*epoch=*/0);

  const bool was_training = model->is_training();
  model->eval();
  torch::NoGradGuard no_grad;
  model::PackedWeights packed(*model, model->precision());  // once for all batches (beam_search's own defers to it)
  const auto device = model->parameters().front().device();
  std::vector<std::vector<Hypothesis>> out(sources.size());
  size_t done = 0;
  for (const auto& batch : batches) {
    std::vector<data::Sentence> src;
    for (auto i : batch) src.push_back(sources[static_cast<size_t>(i)]);
    auto tensors = data::make_batch(src, src, 0, src.size());
    auto hyps = beam_search(model, tensors.src.to(device), config);
    for (size_t j = 0; j < batch.size(); ++j) out[static_cast<size_t>(batch[j])] = std::move(hyps[j]);
    done += batch.size();
    if (progress) progress(done, nonempty.size());
  }
  model->train(was_training);
  return out;
}

std::vector<std::string> best_texts(const std::vector<std::vector<Hypothesis>>& hyps,
                                    const data::Vocab& vocab) {
  std::vector<std::string> out;
  out.reserve(hyps.size());
  for (const auto& h : hyps) out.push_back(h.empty() ? std::string() : vocab.decode(h.front().tokens));
  return out;
}

}  // namespace normlab::decode
