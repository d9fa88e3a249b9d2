// The row kernel of cached_attention.cpp, compiled apart with AVX2/FMA (CMake), as
// beam_log_probs_rows.h: raw pointers and ATen's vector types only. T is float, c10::BFloat16
// or c10::Half; the arithmetic is float.
#pragma once

#include <cstdint>

namespace normlab::model::kernels {

// Rows [begin, end) of one decoding step's self-attention. Row n's query q[n] (H,D) is already
// scaled; its position p's key and value are row rows[n * positions + p] of keys[p] and
// values[p] (each (N_p,H,D), contiguous). out[n] (H,D) = softmax_p(q . k_p) v_p per head.
// `scratch`: heads * (positions + 1 + 2 * d) floats. d is a multiple of 8.
template <class T>
void cached_attention_rows(const T* q, const T* const* keys, const T* const* values, const int64_t* rows,
                           int64_t positions, int64_t heads, int64_t d, int64_t begin, int64_t end, float* scratch,
                           T* out);

}  // namespace normlab::model::kernels
