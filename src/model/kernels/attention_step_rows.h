// The row kernels of attention_step.cpp, compiled apart with AVX2/FMA (CMake), as
// beam_log_probs_rows.h: raw pointers and ATen's vector types only. T is float, c10::BFloat16 or
// c10::Half; the arithmetic is float.
#pragma once

#include <cstdint>

namespace normlab::model::kernels {

// Self-attention's keys and values kept per position: row n's position p is row
// rows[n * positions + p] of keys[p] and values[p] (each (N_p,H,D), contiguous).
template <class T>
struct PositionSlabs {
  const T* const* keys;
  const T* const* values;
  const int64_t* rows;
};

// Encoder-attention's keys and values (B,H,S,D), element (b,h,p,:) at b * stride_b + h * stride_h
// + p * stride_p (the D elements contiguous; the same strides for both). The `group` consecutive
// query rows n of a sentence (its beams) read sentence b = sentences[n / group] (n / group where
// `sentences` is null); bias (B,H,S), contiguous, is added to the scores (-inf at padding), or
// null.
template <class T>
struct SentenceBlocks {
  const T* keys;
  const T* values;
  const T* bias;
  const int64_t* sentences;
  int64_t group, stride_b, stride_h, stride_p;
};

// Rows [begin, end) of one decoding step's attention over `positions` positions: q[n] (H,D)
// already scaled, out[n] (H,D) = softmax_p(q . k_p + bias_p) v_p per head. `scratch`:
// heads * (positions + 1 + 2 * d) floats. d is a multiple of 8.
template <class T>
void attention_step_rows(const T* q, const PositionSlabs<T>& kv, int64_t positions, int64_t heads, int64_t d,
                         int64_t begin, int64_t end, float* scratch, T* out);
template <class T>
void attention_step_rows(const T* q, const SentenceBlocks<T>& kv, int64_t positions, int64_t heads, int64_t d,
                         int64_t begin, int64_t end, float* scratch, T* out);

}  // namespace normlab::model::kernels
