// The body of int8_rows.h's kernels, compiled twice (CMake): into int8_rows.cpp with AVX2/FMA and
// into int8_rows_avx512.cpp with AVX-512, each defining NORMLAB_ROWS_ISA (avx2, avx512) and
// including this file once.
#include "model/kernels/int8_rows.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

namespace normlab::model::kernels::NORMLAB_ROWS_ISA {
namespace {

using Vec = at::vec::Vectorized<float>;
using IntVec = at::vec::Vectorized<int32_t>;
constexpr int64_t kLanes = Vec::size();

float max_abs(const float* x, int64_t k) {
  const int64_t body = k - k % kLanes;
  Vec m(0.0f);
  for (int64_t j = 0; j < body; j += kLanes) m = at::vec::maximum(m, Vec::loadu(x + j).abs());
  float mx = at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return at::vec::maximum(a, b); }, m);
  for (int64_t j = body; j < k; ++j) mx = std::max(mx, std::abs(x[j]));
  return mx;
}

}  // namespace

void quantise_rows(const float* x, int64_t k, int64_t begin, int64_t end, RowGrid grid, uint8_t* q,
                   float* norm) {
  const int64_t body = k - k % kLanes;
  const float inverse = 1.0f / grid.step;  // fbgemm's 1.f / scale
  const float zero_point = static_cast<float>(grid.zero_point), qmax = static_cast<float>(grid.qmax);
  const Vec v_inverse(inverse), v_zero_point(zero_point), v_low(0.0f), v_high(qmax);
  alignas(64) int32_t lanes[kLanes];
  for (int64_t i = begin; i < end; ++i) {
    const float* r = x + i * k;
    uint8_t* out = q + i * k;
    const float n_i = std::max(max_abs(r, k), std::numeric_limits<float>::min());
    norm[i] = n_i;
    const Vec v_norm(n_i);
    for (int64_t j = 0; j < body; j += kLanes) {
      // fbgemm's QuantizeAvx2: fma(x, 1/scale, zero point), clipped, rounded to the nearest even
      const auto t = at::vec::clamp(at::vec::fmadd(Vec::loadu(r + j) / v_norm, v_inverse, v_zero_point), v_low, v_high);
      at::vec::convert_to_int_of_same_size(t.round()).store(lanes);
      for (int64_t l = 0; l < kLanes; ++l) out[j + l] = static_cast<uint8_t>(lanes[l]);
    }
    for (int64_t j = body; j < k; ++j)
      out[j] = static_cast<uint8_t>(std::nearbyint(std::clamp(std::fma(r[j] / n_i, inverse, zero_point), 0.0f, qmax)));
  }
}

void dequantise_rows(int32_t* acc, int64_t n, int64_t begin, int64_t end, const float* norm,
                     const float* col_scale, const int32_t* col_offset, const float* bias, bool relu) {
  const int64_t body = n - n % kLanes;
  const Vec zero(0.0f);
  for (int64_t i = begin; i < end; ++i) {
    int32_t* a = acc + i * n;
    float* y = reinterpret_cast<float*>(a);  // the same memory: each lane is read before written
    const float n_i = norm[i];
    const Vec v_norm(n_i);
    for (int64_t j = 0; j < body; j += kLanes) {
      const auto centred = at::vec::convert_to_fp_of_same_size<float>(IntVec::loadu(a + j) - IntVec::loadu(col_offset + j));
      const auto y_j = centred * Vec::loadu(col_scale + j);  // no FMA contraction (CMake)
      auto v = bias ? at::vec::fmadd(y_j, v_norm, Vec::loadu(bias + j)) : y_j * v_norm;
      if (relu) v = at::vec::maximum(v, zero);
      v.store(y + j);
    }
    for (int64_t j = body; j < n; ++j) {
      const float y_j = static_cast<float>(a[j] - col_offset[j]) * col_scale[j];
      const float v = bias ? std::fma(y_j, n_i, bias[j]) : y_j * n_i;
      y[j] = relu ? std::max(v, 0.0f) : v;
    }
  }
}

}  // namespace normlab::model::kernels::NORMLAB_ROWS_ISA
