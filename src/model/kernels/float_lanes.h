// ATen's float vector loaded from float, c10::BFloat16 or c10::Half elements: for the row
// kernels compiled apart with AVX2/FMA (CMake); include it only from those files.
#pragma once

#include <type_traits>

#include <ATen/cpu/vec/vec.h>

namespace normlab::model::kernels {

using FloatLanes = at::vec::Vectorized<float>;

template <class T>
FloatLanes load_float(const T* x) {
  if constexpr (std::is_same_v<T, float>) {
    return FloatLanes::loadu(x);
  } else {
    FloatLanes a;
    at::vec::load_to_float(x, a);
    return a;
  }
}

}  // namespace normlab::model::kernels
