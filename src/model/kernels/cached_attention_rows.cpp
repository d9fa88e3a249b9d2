#include "model/kernels/cached_attention_rows.h"

#include <algorithm>
#include <limits>
#include <type_traits>

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "model/kernels/float_lanes.h"

namespace normlab::model::kernels {
namespace {

using Vec = FloatLanes;
constexpr int64_t kLanes = Vec::size();

float sum_lanes(const Vec& a) {
  return at::vec::vec_reduce_all<float>([](Vec& x, Vec& y) { return x + y; }, a);
}

// s[0, n) <- exp(s - max s) (ATen's vectorised exp, as its softmax); returns their sum.
float exp_shifted(float* s, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, s[j]);
  const Vec shift(mx);
  Vec vsum(0.0f);
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    const Vec e = (Vec::loadu(s + j) - shift).exp();
    e.store(s + j);
    vsum = vsum + e;
  }
  float sum = sum_lanes(vsum);
  if (j < n) {
    (Vec::loadu(s + j, n - j) - shift).exp().store(s + j, n - j);
    for (; j < n; ++j) sum += s[j];
  }
  return sum;
}

}  // namespace

template <class T>
void cached_attention_rows(const T* q, const T* const* keys, const T* const* values, const int64_t* rows,
                           int64_t positions, int64_t heads, int64_t d, int64_t begin, int64_t end, float* scratch,
                           T* out) {
  const int64_t c = heads * d;
  float* scores = scratch;               // (H, positions)
  float* inv_sum = scores + heads * positions;  // (H)
  float* qf = inv_sum + heads;           // q[n] as float (C)
  float* acc = qf + c;                   // out[n] before the conversion to T (C)
  for (int64_t n = begin; n < end; ++n) {
    const int64_t* r = rows + n * positions;
    for (int64_t j = 0; j < c; j += kLanes) load_float(q + n * c + j).store(qf + j);
    // scores[h][p] = q_h . k_p,h: each position's keys of all heads read once, in order
    for (int64_t p = 0; p < positions; ++p) {
      const T* k = keys[p] + r[p] * c;
      for (int64_t h = 0; h < heads; ++h) {
        Vec dot(0.0f);
        for (int64_t j = h * d; j < (h + 1) * d; j += kLanes) dot = at::vec::fmadd(Vec::loadu(qf + j), load_float(k + j), dot);
        scores[h * positions + p] = sum_lanes(dot);
      }
    }
    for (int64_t h = 0; h < heads; ++h) inv_sum[h] = 1.0f / exp_shifted(scores + h * positions, positions);
    // acc_h = sum_p exp(s_p - max) v_p,h, then / sum_p exp(s_p - max)
    std::fill(acc, acc + c, 0.0f);
    for (int64_t p = 0; p < positions; ++p) {
      const T* v = values[p] + r[p] * c;
      for (int64_t h = 0; h < heads; ++h) {
        const Vec w(scores[h * positions + p]);
        for (int64_t j = h * d; j < (h + 1) * d; j += kLanes)
          at::vec::fmadd(w, load_float(v + j), Vec::loadu(acc + j)).store(acc + j);
      }
    }
    for (int64_t h = 0; h < heads; ++h) {
      const Vec scale(inv_sum[h]);
      for (int64_t j = h * d; j < (h + 1) * d; j += kLanes) (Vec::loadu(acc + j) * scale).store(acc + j);
    }
    at::vec::convert(acc, out + n * c, c);
  }
}

template void cached_attention_rows<float>(const float*, const float* const*, const float* const*, const int64_t*,
                                           int64_t, int64_t, int64_t, int64_t, int64_t, float*, float*);
template void cached_attention_rows<c10::BFloat16>(const c10::BFloat16*, const c10::BFloat16* const*,
                                                   const c10::BFloat16* const*, const int64_t*, int64_t, int64_t,
                                                   int64_t, int64_t, int64_t, float*, c10::BFloat16*);
template void cached_attention_rows<c10::Half>(const c10::Half*, const c10::Half* const*, const c10::Half* const*,
                                               const int64_t*, int64_t, int64_t, int64_t, int64_t, int64_t, float*,
                                               c10::Half*);

}  // namespace normlab::model::kernels
