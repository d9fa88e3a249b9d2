#include "model/kernels/beam_log_probs.h"

#include <limits>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "model/kernels/beam_log_probs_rows.h"
#include "model/kernels/cpu_features.h"

namespace normlab::model::kernels {
namespace {

constexpr int64_t kRowsPerTask = 16;

// The unfused composition (beam search before the fused rows; their test's reference).
torch::Tensor composed(const torch::Tensor& logits, const torch::Tensor& scores) {
  const bool reduced = logits.scalar_type() == torch::kBFloat16 || logits.scalar_type() == torch::kHalf;
  auto lp = torch::log_softmax(reduced ? logits.to(torch::kFloat) : logits, -1);
  lp.masked_fill_(lp.ne(lp), -std::numeric_limits<double>::infinity());
  return scores.defined() ? lp.add_(scores.unsqueeze(1)) : lp;
}

// f(pointer to x's first element) as const float*, const c10::BFloat16* or const c10::Half*:
// the dtypes beam_log_probs_fused() admits.
template <class F>
void with_typed_rows(const torch::Tensor& x, F&& f) {
  if (x.scalar_type() == torch::kFloat) f(x.data_ptr<float>());
  else if (x.scalar_type() == torch::kBFloat16) f(reinterpret_cast<const c10::BFloat16*>(x.data_ptr()));
  else f(reinterpret_cast<const c10::Half*>(x.data_ptr()));
}

void check_shapes(const char* what, const torch::Tensor& logits, const torch::Tensor& scores) {
  TORCH_CHECK(logits.dim() == 2 && (!scores.defined() || (scores.dim() == 1 && scores.size(0) == logits.size(0))),
              what, ": logits (N,V) and scores (N), got ", logits.sizes(), " and ",
              scores.defined() ? scores.sizes() : torch::IntArrayRef{});
}

}  // namespace

bool beam_log_probs_fused(const torch::Tensor& logits) {
  const auto type = logits.scalar_type();
  return avx2_fma() && logits.device().is_cpu() &&
         (type == torch::kFloat || type == torch::kBFloat16 || type == torch::kHalf);
}

torch::Tensor beam_log_probs(const torch::Tensor& logits, const torch::Tensor& scores) {
  check_shapes("beam_log_probs", logits, scores);
  if (!beam_log_probs_fused(logits)) return composed(logits, scores);
  auto x = logits.contiguous();
  const int64_t n = x.size(0), v = x.size(1);
  auto out = torch::empty({n, v}, x.options().dtype(torch::kFloat));
  torch::Tensor s = scores.defined() ? scores.to(torch::kFloat).contiguous() : torch::Tensor();
  const float* ps = s.defined() ? s.data_ptr<float>() : nullptr;
  with_typed_rows(x, [&](const auto* px) {
    at::parallel_for(0, n, kRowsPerTask, [&](int64_t begin, int64_t end) {
      if (aten_avx512()) avx512::beam_log_probs_rows(px, ps, v, begin, end, out.data_ptr<float>());
      else avx2::beam_log_probs_rows(px, ps, v, begin, end, out.data_ptr<float>());
    });
  });
  return out;
}

BeamCandidates beam_candidates(const torch::Tensor& logits, const torch::Tensor& scores, int64_t k,
                               const std::vector<int64_t>& banned, const std::vector<uint8_t>& eos_only, int64_t eos) {
  RECORD_FUNCTION("normlab::beam_candidates", std::vector<c10::IValue>());  // in profiles (bench/profile_ops.py)
  check_shapes("beam_candidates", logits, scores);
  const int64_t n = logits.size(0), v = logits.size(1);
  TORCH_CHECK(k >= 1 && k <= v, "beam_candidates: k ", k, " for ", v, " entries a row");
  TORCH_CHECK(eos_only.empty() || static_cast<int64_t>(eos_only.size()) == n, "beam_candidates: ",
              eos_only.size(), " eos_only flags for ", n, " rows");
  TORCH_CHECK(eos >= 0 && eos < v, "beam_candidates: eos ", eos, " outside ", v, " entries");
  for (const auto id : banned) TORCH_CHECK(id >= 0 && id < v, "beam_candidates: banned id ", id, " outside ", v);
  if (!beam_log_probs_fused(logits)) {
    auto lp = beam_log_probs(logits, scores);
    constexpr double kNegInf = -std::numeric_limits<double>::infinity();
    if (!eos_only.empty()) {
      auto rows = torch::tensor(std::vector<int64_t>(eos_only.begin(), eos_only.end()), torch::kInt64)
                      .to(lp.device()).to(torch::kBool);
      auto kept = lp.select(1, eos).clone();
      lp.masked_fill_(rows.unsqueeze(1), kNegInf);
      lp.select(1, eos).copy_(kept);
    }
    for (const auto id : banned) lp.select(1, id).fill_(kNegInf);
    auto [values, ids] = lp.topk(k);
    return {values, ids};
  }
  auto x = logits.contiguous();
  auto values = torch::empty({n, k}, x.options().dtype(torch::kFloat));
  auto ids = torch::empty({n, k}, x.options().dtype(torch::kInt64));
  torch::Tensor s = scores.defined() ? scores.to(torch::kFloat).contiguous() : torch::Tensor();
  CandidateMasks masks;
  masks.banned = banned.data();
  masks.n_banned = static_cast<int64_t>(banned.size());
  masks.eos_only = eos_only.empty() ? nullptr : eos_only.data();
  masks.eos = eos;
  const float* ps = s.defined() ? s.data_ptr<float>() : nullptr;
  with_typed_rows(x, [&](const auto* px) {
    at::parallel_for(0, n, kRowsPerTask, [&](int64_t begin, int64_t end) {
      auto* pv = values.data_ptr<float>();
      auto* pi = ids.data_ptr<int64_t>();
      if (aten_avx512()) avx512::beam_candidate_rows(px, ps, v, begin, end, masks, k, pv, pi);
      else avx2::beam_candidate_rows(px, ps, v, begin, end, masks, k, pv, pi);
    });
  });
  return {values, ids};
}

}  // namespace normlab::model::kernels
