// The row kernel of beam_log_probs.cpp, compiled apart with AVX2/FMA (CMake), as
// log_softmax_terms_rows.h: raw pointers and ATen's vector types only. Rows [begin, end) of
// logits (n,v); T is float, c10::BFloat16 or c10::Half; scores may be null (0).
#pragma once

#include <cstdint>

namespace normlab::model::kernels {

template <class T>
void beam_log_probs_rows(const T* logits, const float* scores, int64_t v, int64_t begin, int64_t end, float* out);

}  // namespace normlab::model::kernels
