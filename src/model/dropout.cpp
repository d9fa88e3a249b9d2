#include "model/dropout.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "model/kernels/dropout_rows.h"
#include "model/kernels/dropout_rows_avx512.h"

namespace normlab::model {
namespace {

constexpr int64_t kPairsPerTask = 8192;

bool avx512_kernels() {
#if defined(NORMLAB_DROPOUT_AVX512) && defined(__GNUC__)
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
  return yes;
#else
  return false;
#endif
}

kernels::MaskBits mask_bits(int64_t n, uint64_t seed, double p) {
  return {seed, static_cast<uint32_t>(p * 4294967296.0), n};
}

// f(begin, end) over the element pairs of `bits`, split between the intra-op threads (the mask
// does not depend on the split).
template <class F>
void for_pair_ranges(const kernels::MaskBits& bits, const F& f) {
  at::parallel_for(0, (bits.n + 1) / 2, kPairsPerTask, f);
}

// The mask of (seed, p) applied to x, the result in out_type (dropout() then a cast, one pass).
torch::Tensor masked(const torch::Tensor& x, uint64_t seed, double p, c10::ScalarType out_type) {
  auto in = x.contiguous();
  auto out = torch::empty(in.sizes(), in.options().dtype(out_type));
  const auto bits = mask_bits(in.numel(), seed, p);
  const auto kernel = avx512_kernels() ? kernels::mask_range_avx512 : kernels::mask_range;
  for_pair_ranges(bits, [&](int64_t begin, int64_t end) {
    kernel(bits, in.scalar_type(), in.data_ptr(), out_type, out.data_ptr(), p, begin, end);
  });
  return out;
}

// The mask is its own derivative: backward applies the same mask (the same seed) to the
// incoming gradient, through this Function again so that double backward works too. The result
// may be asked for in another dtype (dropout_add's backward: an fp32 gradient masked into a bf16
// branch's dtype in one pass); backward returns to the input's.
class MaskFunction : public torch::autograd::Function<MaskFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, int64_t seed,
                               double p, int64_t out_type) {
    ctx->saved_data["seed"] = seed;
    ctx->saved_data["p"] = p;
    ctx->saved_data["x_type"] = static_cast<int64_t>(x.scalar_type());
    return masked(x, static_cast<uint64_t>(seed), p, static_cast<c10::ScalarType>(out_type));
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto seed = ctx->saved_data["seed"].toInt();
    const auto p = ctx->saved_data["p"].toDouble();
    const auto x_type = ctx->saved_data["x_type"].toInt();
    return {MaskFunction::apply(grad[0], seed, p, x_type), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// residual + MaskFunction(y): the residual's gradient passes through, y's is masked like y.
class AddMaskedFunction : public torch::autograd::Function<AddMaskedFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& residual,
                               const torch::Tensor& y, int64_t seed, double p) {
    ctx->saved_data["seed"] = seed;
    ctx->saved_data["p"] = p;
    ctx->saved_data["y_type"] = static_cast<int64_t>(y.scalar_type());
    auto r = residual.contiguous(), v = y.contiguous();
    auto out = torch::empty_like(r);
    const auto bits = mask_bits(r.numel(), static_cast<uint64_t>(seed), p);
    const auto kernel = avx512_kernels() ? kernels::add_mask_range_avx512 : kernels::add_mask_range;
    for_pair_ranges(bits, [&](int64_t begin, int64_t end) {
      kernel(bits, r.scalar_type(), r.data_ptr(), v.scalar_type(), v.data_ptr(), out.data_ptr(), p, begin, end);
    });
    return out;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto seed = ctx->saved_data["seed"].toInt();
    const auto p = ctx->saved_data["p"].toDouble();
    const auto y_type = ctx->saved_data["y_type"].toInt();
    return {grad[0], MaskFunction::apply(grad[0], seed, p, y_type), torch::Tensor(), torch::Tensor()};
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
  return MaskFunction::apply(x, draw_seed(), p, static_cast<int64_t>(x.scalar_type()));
}

}  // namespace normlab::model
