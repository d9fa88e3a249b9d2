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

// Calls set(i, keep_i) for every i in [0, n): element i is kept when its 32 bits of
// hash(seed, i / 2) are >= p 2^32, two decisions per 64-bit hash (its 32-bit halves).
template <class F>
void for_each_decision(int64_t n, uint64_t seed, double p, const F& set) {
  const auto threshold = static_cast<uint32_t>(p * 4294967296.0);
  at::parallel_for(0, (n + 1) / 2, 16384, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const uint64_t h = mix(seed + static_cast<uint64_t>(k) * 0x9e3779b97f4a7c15ULL);
      set(2 * k, static_cast<uint32_t>(h) >= threshold);
      if (2 * k + 1 < n) set(2 * k + 1, static_cast<uint32_t>(h >> 32) >= threshold);
    }
  });
}

// out[i] = in[i] * (keep_i ? scale : 0). bf16/fp16 multiply in float (at::opmath_type), so
// that the scale is not rounded to 8 bits.
template <class T>
void apply_mask(const T* in, T* out, int64_t n, uint64_t seed, double p) {
  using Math = at::opmath_type<T>;
  const Math scale = static_cast<Math>(1.0 / (1.0 - p));
  for_each_decision(n, seed, p, [&](int64_t i, bool keep) {
    out[i] = keep ? static_cast<T>(static_cast<Math>(in[i]) * scale) : T(0);
  });
}

// out[i] = r[i] + (keep_i ? y[i] * scale : 0) in R's arithmetic (float for fp32, as dropout()
// followed by an add: the same two roundings).
template <class R, class Y>
void add_masked(const R* r, const Y* y, R* out, int64_t n, uint64_t seed, double p) {
  const R scale = static_cast<R>(1.0 / (1.0 - p));
  for_each_decision(n, seed, p, [&](int64_t i, bool keep) {
    out[i] = keep ? r[i] + static_cast<R>(y[i]) * scale : r[i];
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

// residual + MaskFunction(y): the residual's gradient passes through, y's is masked like y.
class AddMaskedFunction : public torch::autograd::Function<AddMaskedFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& residual,
                               const torch::Tensor& y, int64_t seed, double p) {
    ctx->saved_data["seed"] = seed;
    ctx->saved_data["p"] = p;
    ctx->saved_data["y_dtype"] = static_cast<int64_t>(y.scalar_type());
    auto r = residual.contiguous(), v = y.contiguous();
    auto out = torch::empty_like(r);
    AT_DISPATCH_FLOATING_TYPES(r.scalar_type(), "normlab_dropout_add", [&] {
      using R = scalar_t;
      AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, v.scalar_type(), "normlab_dropout_add_y", [&] {
        add_masked(r.data_ptr<R>(), v.data_ptr<scalar_t>(), out.data_ptr<R>(), r.numel(),
                   static_cast<uint64_t>(seed), p);
      });
    });
    return out;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto seed = ctx->saved_data["seed"].toInt();
    const auto p = ctx->saved_data["p"].toDouble();
    const auto y_dtype = static_cast<c10::ScalarType>(ctx->saved_data["y_dtype"].toInt());
    return {grad[0], MaskFunction::apply(grad[0], seed, p).to(y_dtype), torch::Tensor(), torch::Tensor()};
  }
};

// The seed of one dropout call, from torch's default generator.
int64_t draw_seed() {
  return torch::randint(std::numeric_limits<int64_t>::max(), {1}, torch::kInt64).item<int64_t>();
}

}  // namespace

torch::Tensor dropout_add(const torch::Tensor& residual, const torch::Tensor& y, double p, bool training) {
  TORCH_CHECK(residual.sizes() == y.sizes(), "dropout_add: residual ", residual.sizes(), " and branch ",
              y.sizes(), " differ");
  if (!training || p <= 0.0 || !y.device().is_cpu()) return residual + model::dropout(y, p, training).to(residual.scalar_type());
  return AddMaskedFunction::apply(residual, y, draw_seed(), p);
}

torch::Tensor dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p <= 0.0) return x;
  if (!x.device().is_cpu()) return torch::dropout(x, p, true);  // ATen's kernel on accelerators
  return MaskFunction::apply(x, draw_seed(), p);
}

}  // namespace normlab::model
