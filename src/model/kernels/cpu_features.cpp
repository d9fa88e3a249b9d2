#include "model/kernels/cpu_features.h"

#include "core/runtime.h"

namespace normlab::model::kernels {

bool avx2_fma() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
#else
  return false;  // the row kernels are built for x86-64's AVX2 only
#endif
}

bool onednn_bf16() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool yes =
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return yes;
#else
  return false;
#endif
}

bool avx512_vnni() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool yes = __builtin_cpu_supports("avx512vnni");
  return yes;
#else
  return false;
#endif
}

bool aten_avx512() {
  static const bool yes = core::runtime_info().cpu_capability == "AVX512";
  return yes;
}

}  // namespace normlab::model::kernels
