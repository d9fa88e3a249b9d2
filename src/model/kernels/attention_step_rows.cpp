#include "model/kernels/attention_step_rows.h"

#include <algorithm>
#include <limits>

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

// s[0, n) <- exp(s - max s) (ATen's vectorised exp, as its softmax); returns their sum. A -inf
// score (padding) gets 0; at least one score is finite.
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

// Where row n's position p of head h is, for each layout.
template <class T>
struct Locate {
  const PositionSlabs<T>& kv;
  int64_t positions, heads, d;
  int64_t offset(int64_t n, int64_t p, int64_t h) const { return (kv.rows[n * positions + p] * heads + h) * d; }
  const T* key(int64_t n, int64_t p, int64_t h) const { return kv.keys[p] + offset(n, p, h); }
  const T* value(int64_t n, int64_t p, int64_t h) const { return kv.values[p] + offset(n, p, h); }
  float bias(int64_t, int64_t, int64_t) const { return 0.0f; }
};

template <class T>
struct LocateBlocks {
  const SentenceBlocks<T>& kv;
  int64_t positions, heads, d;
  int64_t sentence(int64_t n) const { return kv.sentences ? kv.sentences[n / kv.group] : n / kv.group; }
  int64_t offset(int64_t n, int64_t p, int64_t h) const {
    return sentence(n) * kv.stride_b + h * kv.stride_h + p * kv.stride_p;
  }
  const T* key(int64_t n, int64_t p, int64_t h) const { return kv.keys + offset(n, p, h); }
  const T* value(int64_t n, int64_t p, int64_t h) const { return kv.values + offset(n, p, h); }
  float bias(int64_t n, int64_t p, int64_t h) const {
    return kv.bias ? static_cast<float>(kv.bias[(sentence(n) * heads + h) * positions + p]) : 0.0f;
  }
};

template <class T, class Where>
void rows(const T* q, const Where& at, int64_t positions, int64_t heads, int64_t d, int64_t begin, int64_t end,
          float* scratch, T* out) {
  const int64_t c = heads * d;
  float* scores = scratch;                      // (H, positions)
  float* inv_sum = scores + heads * positions;  // (H)
  float* qf = inv_sum + heads;                  // q[n] as float (C)
  float* acc = qf + c;                          // out[n] before the conversion to T (C)
  for (int64_t n = begin; n < end; ++n) {
    for (int64_t j = 0; j < c; j += kLanes) load_float(q + n * c + j).store(qf + j);
    for (int64_t h = 0; h < heads; ++h) {
      const float* qh = qf + h * d;
      float* s = scores + h * positions;
      for (int64_t p = 0; p < positions; ++p) {  // s_p = q_h . k_p,h + bias
        const T* k = at.key(n, p, h);
        Vec dot(0.0f);
        for (int64_t j = 0; j < d; j += kLanes) dot = at::vec::fmadd(Vec::loadu(qh + j), load_float(k + j), dot);
        s[p] = sum_lanes(dot) + at.bias(n, p, h);
      }
      inv_sum[h] = 1.0f / exp_shifted(s, positions);
    }
    // acc_h = sum_p exp(s_p - max) v_p,h, then / sum_p exp(s_p - max)
    for (int64_t h = 0; h < heads; ++h) {
      float* a = acc + h * d;
      std::fill(a, a + d, 0.0f);
      for (int64_t p = 0; p < positions; ++p) {
        const T* v = at.value(n, p, h);
        const Vec w(scores[h * positions + p]);
        for (int64_t j = 0; j < d; j += kLanes) at::vec::fmadd(w, load_float(v + j), Vec::loadu(a + j)).store(a + j);
      }
      const Vec scale(inv_sum[h]);
      for (int64_t j = 0; j < d; j += kLanes) (Vec::loadu(a + j) * scale).store(a + j);
    }
    at::vec::convert(acc, out + n * c, c);
  }
}

}  // namespace

template <class T>
void attention_step_rows(const T* q, const PositionSlabs<T>& kv, int64_t positions, int64_t heads, int64_t d,
                         int64_t begin, int64_t end, float* scratch, T* out) {
  rows(q, Locate<T>{kv, positions, heads, d}, positions, heads, d, begin, end, scratch, out);
}

template <class T>
void attention_step_rows(const T* q, const SentenceBlocks<T>& kv, int64_t positions, int64_t heads, int64_t d,
                         int64_t begin, int64_t end, float* scratch, T* out) {
  rows(q, LocateBlocks<T>{kv, positions, heads, d}, positions, heads, d, begin, end, scratch, out);
}

#define NORMLAB_ATTENTION_STEP_ROWS(T)                                                                         \
  template void attention_step_rows<T>(const T*, const PositionSlabs<T>&, int64_t, int64_t, int64_t, int64_t,  \
                                       int64_t, float*, T*);                                                   \
  template void attention_step_rows<T>(const T*, const SentenceBlocks<T>&, int64_t, int64_t, int64_t, int64_t, \
                                       int64_t, float*, T*);
NORMLAB_ATTENTION_STEP_ROWS(float)
NORMLAB_ATTENTION_STEP_ROWS(c10::BFloat16)
NORMLAB_ATTENTION_STEP_ROWS(c10::Half)
#undef NORMLAB_ATTENTION_STEP_ROWS

}  // namespace normlab::model::kernels
