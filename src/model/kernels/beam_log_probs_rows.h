// The row kernels of beam_log_probs.cpp, compiled apart (CMake; beam_log_probs_rows_impl.h), as
// log_softmax_terms_rows.h: raw pointers and ATen's vector types only. Rows [begin, end) of
// logits (n,v); T is float, c10::BFloat16 or c10::Half; scores may be null (0).
#pragma once

#include <cstdint>

namespace normlab::model::kernels {

// What beam_candidate_rows() excludes: the ids in banned[0, n_banned) are -inf in every row,
// and a row i with eos_only[i] != 0 (eos_only may be null) may only produce `eos`.
struct CandidateMasks {
  const int64_t* banned = nullptr;
  int64_t n_banned = 0;
  const uint8_t* eos_only = nullptr;
  int64_t eos = 0;
};

// The kernels once per instruction set: avx2 (AVX2 and FMA) and avx512 (AVX-512 F/DQ/VL/BW,
// ATen's exp on 16 lanes; a decode 1-2% faster on the AVX-512 EPYC, docs/performance.md), the
// latter run where ATen's own kernels run at AVX-512.
#define NORMLAB_BEAM_ROWS(isa)                                                                                    \
  namespace isa {                                                                                                 \
  template <class T>                                                                                              \
  void beam_log_probs_rows(const T* logits, const float* scores, int64_t v, int64_t begin, int64_t end,           \
                           float* out);                                                                          \
  /* The k best continuations of rows [begin, end) by beam_log_probs_rows' values, with `masks`: values (n,k) */  \
  /* best first and their ids (n,k); an equal value keeps the lower id first; slots with no finite value get */   \
  /* -inf and the lowest ids not already in the row. k <= v. */                                                   \
  template <class T>                                                                                              \
  void beam_candidate_rows(const T* logits, const float* scores, int64_t v, int64_t begin, int64_t end,           \
                           const CandidateMasks& masks, int64_t k, float* values, int64_t* ids);                  \
  }
NORMLAB_BEAM_ROWS(avx2)
NORMLAB_BEAM_ROWS(avx512)
#undef NORMLAB_BEAM_ROWS

}  // namespace normlab::model::kernels
