// The element loops of the counter-based dropout (model/dropout.cpp), written for the
// compiler's vectoriser: each block of pairs gets its splitmix64 hashes first (one multiply
// chain per 64-bit lane), then its elements take their keep bit from the hashes read as 32-bit
// halves and select in registers. This file is compiled twice: into dropout.cpp for any x86-64
// or other machine, and into dropout_rows_avx512.cpp with AVX-512 (64-bit lane multiplies),
// chosen at run time. Hence the internal linkage: each file has its own copy.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include <ATen/OpMathType.h>
#include <c10/core/ScalarType.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "dropout_rows reads a 64-bit hash as its low then high 32-bit half");

namespace normlab::model::kernels {

// The mask of one dropout call: element i of n is kept when the 32 bits of hash(seed, i / 2)
// that belong to it (the low half for even i, the high half for odd i) are >= threshold = p 2^32.
struct MaskBits {
  uint64_t seed;
  uint32_t threshold;
  int64_t n;
};

namespace {  // NOLINT(build/namespaces): one copy per instruction set, see above

// splitmix64 (Steele et al. 2014): a bijective mixer; seed + k * golden gives independent-looking bits.
inline uint64_t splitmix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr int64_t kBlockPairs = 256;

// body(first_element, count, bits) over the elements of pairs [pair_begin, pair_end), in
// blocks; bits[j] decides element first_element + j.
template <class Body>
void for_each_block(const MaskBits& mask, int64_t pair_begin, int64_t pair_end, const Body& body) {
  // Each 64-bit hash stored as its two 32-bit halves, low first (what reading a uint64_t array
  // through a uint32_t pointer gives on x86-64, without that aliasing, which C++ forbids).
  alignas(64) uint32_t bits[2 * kBlockPairs];
  for (int64_t k = pair_begin; k < pair_end; k += kBlockPairs) {
    const int64_t pairs = std::min(kBlockPairs, pair_end - k);
    for (int64_t j = 0; j < pairs; ++j) {
      const uint64_t h = splitmix64(mask.seed + static_cast<uint64_t>(k + j) * 0x9e3779b97f4a7c15ULL);
      bits[2 * j] = static_cast<uint32_t>(h);
      bits[2 * j + 1] = static_cast<uint32_t>(h >> 32);
    }
    const int64_t first = 2 * k;
    body(first, std::min(2 * (k + pairs), mask.n) - first, bits);
  }
}

// out[i] = O(keep_i ? M(x[i]) * scale : 0), M = float for bf16/fp16 (the scale is not rounded
// to 8 bits), the type itself otherwise: dropout() followed by a cast to O, in one pass.
template <class X, class O>
void mask_pairs(const MaskBits& bits, const X* x, O* out, double p, int64_t pair_begin, int64_t pair_end) {
  using M = at::opmath_type<X>;
  const M scale = static_cast<M>(1.0 / (1.0 - p));
  for_each_block(bits, pair_begin, pair_end, [&](int64_t first, int64_t count, const uint32_t* b) {
    const X* xi = x + first;
    O* oi = out + first;
    for (int64_t j = 0; j < count; ++j)
      oi[j] = static_cast<O>((b[j] >= bits.threshold ? static_cast<M>(xi[j]) : M(0)) * scale);
  });
}

// out[i] = r[i] + (keep_i ? R(y[i]) : 0) * scale in R's arithmetic: r + dropout(y.to(R)), the
// same roundings.
template <class R, class Y>
void add_mask_pairs(const MaskBits& bits, const R* r, const Y* y, R* out, double p, int64_t pair_begin,
                    int64_t pair_end) {
  const R scale = static_cast<R>(1.0 / (1.0 - p));
  for_each_block(bits, pair_begin, pair_end, [&](int64_t first, int64_t count, const uint32_t* b) {
    const R* ri = r + first;
    const Y* yi = y + first;
    R* oi = out + first;
    for (int64_t j = 0; j < count; ++j) oi[j] = ri[j] + (b[j] >= bits.threshold ? static_cast<R>(yi[j]) : R(0)) * scale;
  });
}

// f(tag) with a value of the C++ type of t (double, float, bf16, fp16).
template <class F>
void with_type(c10::ScalarType t, const F& f) {
  switch (t) {
    case c10::ScalarType::Double: return f(double());
    case c10::ScalarType::Float: return f(float());
    case c10::ScalarType::BFloat16: return f(c10::BFloat16());
    case c10::ScalarType::Half: return f(c10::Half());
    // No TORCH_CHECK here: its message formatter would be instantiated in the AVX-512 file as a
    // weak symbol the linker might pick for the whole program.
    default: throw std::invalid_argument("dropout: double, float, bfloat16 or half tensors only");
  }
}

// The kernels of one instruction set, on raw storage (every pair of dtypes of with_type).
inline void mask_range(const MaskBits& bits, c10::ScalarType x_type, const void* x, c10::ScalarType out_type,
                       void* out, double p, int64_t pair_begin, int64_t pair_end) {
  with_type(x_type, [&](auto xt) {
    using X = decltype(xt);
    with_type(out_type, [&](auto ot) {
      using O = decltype(ot);
      mask_pairs(bits, static_cast<const X*>(x), static_cast<O*>(out), p, pair_begin, pair_end);
    });
  });
}

inline void add_mask_range(const MaskBits& bits, c10::ScalarType r_type, const void* r, c10::ScalarType y_type,
                           const void* y, void* out, double p, int64_t pair_begin, int64_t pair_end) {
  with_type(r_type, [&](auto rt) {
    using R = decltype(rt);
    with_type(y_type, [&](auto yt) {
      using Y = decltype(yt);
      add_mask_pairs(bits, static_cast<const R*>(r), static_cast<const Y*>(y), static_cast<R*>(out), p, pair_begin,
                     pair_end);
    });
  });
}

}  // namespace
}  // namespace normlab::model::kernels
