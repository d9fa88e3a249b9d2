#include "model/kernels/beam_log_probs_rows.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

namespace normlab::model::kernels {
namespace {

using Vec = at::vec::Vectorized<float>;
constexpr int64_t kLanes = Vec::size();

template <class T>
Vec load_float(const T* x) {
  if constexpr (std::is_same_v<T, float>) {
    return Vec::loadu(x);
  } else {
    Vec a;
    at::vec::load_to_float(x, a);
    return a;
  }
}

}  // namespace

template <class T>
void beam_log_probs_rows(const T* logits, const float* scores, int64_t v, int64_t begin, int64_t end, float* out) {
  const int64_t body = v - v % kLanes;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t i = begin; i < end; ++i) {
    const T* x = logits + i * v;
    float* y = out + i * v;
    // Pass 1: the maximum (ATen's maximum propagates NaN).
    Vec vmax(kNegInf);
    for (int64_t j = 0; j < body; j += kLanes) vmax = at::vec::maximum(vmax, load_float(x + j));
    float mx = at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return at::vec::maximum(a, b); }, vmax);
    for (int64_t j = body; j < v; ++j) {
      const float a = static_cast<float>(x[j]);
      mx = std::isnan(a) || std::isnan(mx) ? std::numeric_limits<float>::quiet_NaN() : std::max(mx, a);
    }
    // Pass 2: sum exp(x - max), the row in cache now.
    const Vec shift(mx);
    Vec vsum(0.0f);
    for (int64_t j = 0; j < body; j += kLanes) vsum = vsum + (load_float(x + j) - shift).exp();
    float sum = at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return a + b; }, vsum);
    for (int64_t j = body; j < v; ++j) sum += std::exp(static_cast<float>(x[j]) - mx);
    const float log_sum = std::log(sum), score = scores ? scores[i] : 0.0f;
    if (std::isnan(mx + log_sum)) {  // fairseq: lprobs[lprobs != lprobs] = -inf
      for (int64_t j = 0; j < v; ++j) y[j] = kNegInf;
      continue;
    }
    // Pass 3: ATen's log_softmax order (x - max - log_sum), then the beam's score.
    const Vec vlog(log_sum), vscore(score);
    for (int64_t j = 0; j < body; j += kLanes) (load_float(x + j) - shift - vlog + vscore).store(y + j);
    for (int64_t j = body; j < v; ++j) y[j] = static_cast<float>(x[j]) - mx - log_sum + score;
  }
}

template void beam_log_probs_rows<float>(const float*, const float*, int64_t, int64_t, int64_t, float*);
template void beam_log_probs_rows<c10::BFloat16>(const c10::BFloat16*, const float*, int64_t, int64_t, int64_t, float*);
template void beam_log_probs_rows<c10::Half>(const c10::Half*, const float*, int64_t, int64_t, int64_t, float*);

}  // namespace normlab::model::kernels
