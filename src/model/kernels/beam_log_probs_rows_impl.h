// The body of beam_log_probs_rows.h's kernels, compiled twice (CMake): into
// beam_log_probs_rows.cpp with AVX2/FMA and into beam_log_probs_rows_avx512.cpp with AVX-512,
// each defining NORMLAB_ROWS_ISA (avx2, avx512) and including this file once.
#include "model/kernels/beam_log_probs_rows.h"

#include <cmath>
#include <limits>
#include <utility>

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "model/kernels/float_lanes.h"

namespace normlab::model::kernels::NORMLAB_ROWS_ISA {
namespace {

using Vec = FloatLanes;
constexpr int64_t kLanes = Vec::size();
constexpr int kAllLanes = (1 << kLanes) - 1;  // zero_mask() of a comparison no lane passed

// Passes 1 and 2 over a row (in cache after the first): its maximum (ATen's maximum propagates
// NaN) and log(sum exp(x - max)). NaN in their sum marks a row that fairseq makes all -inf.
template <class T>
std::pair<float, float> max_and_log_sum(const T* x, int64_t v) {
  const int64_t body = v - v % kLanes;
  Vec vmax(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < body; j += kLanes) vmax = at::vec::maximum(vmax, load_float(x + j));
  float mx = at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return at::vec::maximum(a, b); }, vmax);
  for (int64_t j = body; j < v; ++j) {
    const float a = static_cast<float>(x[j]);
    mx = std::isnan(a) || std::isnan(mx) ? std::numeric_limits<float>::quiet_NaN() : std::max(mx, a);
  }
  const Vec shift(mx);
  Vec vsum(0.0f);
  for (int64_t j = 0; j < body; j += kLanes) vsum = vsum + (load_float(x + j) - shift).exp();
  float sum = at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return a + b; }, vsum);
  for (int64_t j = body; j < v; ++j) sum += std::exp(static_cast<float>(x[j]) - mx);
  return {mx, std::log(sum)};
}

// The k best (value, id) of a row, best first; an equal value keeps the earlier id ahead.
class TopK {
 public:
  TopK(float* values, int64_t* ids, int64_t k) : values_(values), ids_(ids), k_(k) {
    for (int64_t i = 0; i < k; ++i) values_[i] = -std::numeric_limits<float>::infinity(), ids_[i] = -1;
  }
  float threshold() const { return values_[k_ - 1]; }
  void offer(float value, int64_t id) {
    if (!(value > values_[k_ - 1])) return;
    int64_t i = k_ - 1;
    for (; i > 0 && value > values_[i - 1]; --i) values_[i] = values_[i - 1], ids_[i] = ids_[i - 1];
    values_[i] = value;
    ids_[i] = id;
  }
  // Slots no finite value reached get the ids not taken yet, in order, at -inf (as ATen's
  // topk returns some id for each -inf it selects).
  void fill_ids(int64_t v) {
    int64_t next = 0;
    for (int64_t i = 0; i < k_; ++i) {
      if (ids_[i] >= 0) continue;
      for (;; ++next) {
        bool taken = false;
        for (int64_t t = 0; t < k_; ++t) taken = taken || ids_[t] == next;
        if (!taken && next < v) break;
      }
      ids_[i] = next++;
    }
  }

 private:
  float* values_;
  int64_t* ids_;
  int64_t k_;
};

}  // namespace

template <class T>
void beam_log_probs_rows(const T* logits, const float* scores, int64_t v, int64_t begin, int64_t end, float* out) {
  const int64_t body = v - v % kLanes;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t i = begin; i < end; ++i) {
    const T* x = logits + i * v;
    float* y = out + i * v;
    const auto [mx, log_sum] = max_and_log_sum(x, v);
    const float score = scores ? scores[i] : 0.0f;
    if (std::isnan(mx + log_sum)) {  // fairseq: lprobs[lprobs != lprobs] = -inf
      for (int64_t j = 0; j < v; ++j) y[j] = kNegInf;
      continue;
    }
    // Pass 3: ATen's log_softmax order (x - max - log_sum), then the beam's score.
    const Vec shift(mx), vlog(log_sum), vscore(score);
    for (int64_t j = 0; j < body; j += kLanes) (load_float(x + j) - shift - vlog + vscore).store(y + j);
    for (int64_t j = body; j < v; ++j) y[j] = static_cast<float>(x[j]) - mx - log_sum + score;
  }
}

template <class T>
void beam_candidate_rows(const T* logits, const float* scores, int64_t v, int64_t begin, int64_t end,
                         const CandidateMasks& masks, int64_t k, float* values, int64_t* ids) {
  const int64_t body = v - v % kLanes;
  auto banned = [&](int64_t j) {
    for (int64_t b = 0; b < masks.n_banned; ++b)
      if (masks.banned[b] == j) return true;
    return false;
  };
  for (int64_t i = begin; i < end; ++i) {
    const T* x = logits + i * v;
    TopK top(values + i * k, ids + i * k, k);
    const auto [mx, log_sum] = max_and_log_sum(x, v);
    const float score = scores ? scores[i] : 0.0f;
    auto value = [&, mx = mx, log_sum = log_sum](int64_t j) {  // pass 3's arithmetic, one element
      return static_cast<float>(x[j]) - mx - log_sum + score;
    };
    if (std::isnan(mx + log_sum)) {  // an all -inf row
    } else if (masks.eos_only && masks.eos_only[i]) {
      if (!banned(masks.eos)) top.offer(value(masks.eos), masks.eos);
    } else {
      // Pass 3 as beam_log_probs_rows, comparing each vector with the k-th best so far; only
      // vectors with a lane above it are looked at element by element, and only there can a
      // banned id be offered, so only there are they skipped.
      const Vec shift(mx), vlog(log_sum), vscore(score);
      alignas(64) float lane[kLanes];
      for (int64_t j = 0; j < body; j += kLanes) {
        const Vec y = load_float(x + j) - shift - vlog + vscore;
        if ((y > Vec(top.threshold())).zero_mask() == kAllLanes) continue;
        y.store(lane);
        for (int64_t l = 0; l < kLanes; ++l)
          if (!banned(j + l)) top.offer(lane[l], j + l);
      }
      for (int64_t j = body; j < v; ++j)
        if (!banned(j)) top.offer(value(j), j);
    }
    top.fill_ids(v);
  }
}

template void beam_log_probs_rows<float>(const float*, const float*, int64_t, int64_t, int64_t, float*);
template void beam_log_probs_rows<c10::BFloat16>(const c10::BFloat16*, const float*, int64_t, int64_t, int64_t, float*);
template void beam_log_probs_rows<c10::Half>(const c10::Half*, const float*, int64_t, int64_t, int64_t, float*);

template void beam_candidate_rows<float>(const float*, const float*, int64_t, int64_t, int64_t,
                                        const CandidateMasks&, int64_t, float*, int64_t*);
template void beam_candidate_rows<c10::BFloat16>(const c10::BFloat16*, const float*, int64_t, int64_t, int64_t,
                                                 const CandidateMasks&, int64_t, float*, int64_t*);
template void beam_candidate_rows<c10::Half>(const c10::Half*, const float*, int64_t, int64_t, int64_t,
                                             const CandidateMasks&, int64_t, float*, int64_t*);

}  // namespace normlab::model::kernels::NORMLAB_ROWS_ISA
