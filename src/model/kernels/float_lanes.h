// ATen's float vector loaded from float, c10::BFloat16 or c10::Half elements: for the row
// kernels compiled apart with AVX2/FMA or AVX-512 (CMake); include it only from those files.
#pragma once

#include <type_traits>

#include <ATen/cpu/vec/vec.h>

namespace normlab::model::kernels {
inline namespace CPU_CAPABILITY {  // one per instruction set a file is built for, as ATen's vec

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

}  // namespace CPU_CAPABILITY
}  // namespace normlab::model::kernels
