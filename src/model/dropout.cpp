#include "model/dropout.h"

#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

namespace normlab::model {
namespace {

// splitmix64 (Steele et al. 2014): a bijective mixer; seed + i gives independent-looking bits.
inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// out[i] = in[i] * (keep_i ? scale : 0); two decisions per 64-bit hash (its 32-bit halves).
// bf16/fp16 multiply in float (at::opmath_type), so that the scale is not rounded to 8 bits.
template <class T>
void apply_mask(const T* in, T* out, int64_t n, uint64_t seed, double p) {
  using Math = at::opmath_type<T>;
  const auto threshold = static_cast<uint32_t>(p * 4294967296.0);
  const Math scale = static_cast<Math>(1.0 / (1.0 - p));
  at::parallel_for(0, (n + 1) / 2, 16384, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const uint64_t h = mix(seed + static_cast<uint64_t>(k) * 0x9e3779b97f4a7c15ULL);
      const int64_t i = 2 * k;
      out[i] = static_cast<uint32_t>(h) >= threshold ? static_cast<T>(static_cast<Math>(in[i]) * scale) : T(0);
      if (i + 1 < n)
        out[i + 1] = static_cast<uint32_t>(h >> 32) >= threshold ? static_cast<T>(static_cast<Math>(in[i + 1]) * scale) : T(0);
    }
  });
}

torch::Tensor masked(const torch::Tensor& x, uint64_t seed, double p) {
  auto in = x.contiguous();
  auto out = torch::empty_like(in);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, in.scalar_type(), "normlab_dropout", [&] {
    apply_mask(in.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), in.numel(), seed, p);
  });
  return out;
}

// The mask is its own derivative: backward applies the same mask (the same seed) to the
// incoming gradient, through this Function again so that double backward works too.
class MaskFunction : public torch::autograd::Function<MaskFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               int64_t seed, double p) {
    ctx->saved_data["seed"] = seed;
    ctx->saved_data["p"] = p;
    return masked(x, static_cast<uint64_t>(seed), p);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto seed = ctx->saved_data["seed"].toInt();
    const auto p = ctx->saved_data["p"].toDouble();
    return {MaskFunction::apply(grad[0], seed, p), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p <= 0.0) return x;
  if (!x.device().is_cpu()) return torch::dropout(x, p, true);  // ATen's kernel on accelerators
  const auto seed = torch::randint(std::numeric_limits<int64_t>::max(), {1}, torch::kInt64).item<int64_t>();
  return MaskFunction::apply(x, seed, p);
}

}  // namespace normlab::model
