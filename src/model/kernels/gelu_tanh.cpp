#include "model/kernels/gelu_tanh.h"

#include <algorithm>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "model/kernels/cpu_features.h"
#include "model/kernels/reduced.h"
#include "model/kernels/gelu_tanh_rows.h"

namespace normlab::model::kernels {
namespace {

// Tasks start at multiples of kBlock (the kernels' 2 x 16 lanes), so that which elements take the
// scalar tail, and hence every bit of the result, does not depend on the thread count.
constexpr int64_t kBlock = 32, kBlocksPerTask = 512;

template <class F>
void for_blocks(int64_t n, F&& span) {
  at::parallel_for(0, (n + kBlock - 1) / kBlock, kBlocksPerTask, [&](int64_t begin, int64_t end) {
    span(begin * kBlock, std::min(end * kBlock, n));
  });
}

template <class T>
const T* elements(const torch::Tensor& t) {
  return reinterpret_cast<const T*>(t.data_ptr());
}

template <class T>
T* elements(torch::Tensor& t) {
  return reinterpret_cast<T*>(t.data_ptr());
}

class GeluTanhFunction : public torch::autograd::Function<GeluTanhFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input) {
    auto x = input.contiguous();
    auto y = torch::empty_like(x);
    dispatch_reduced(x.scalar_type(), [&](auto tag) {
      using T = decltype(tag);
      const auto span = aten_avx512() ? avx512::gelu_tanh_span<T> : avx2::gelu_tanh_span<T>;
      for_blocks(x.numel(), [&](int64_t begin, int64_t end) { span(elements<T>(x), begin, end, elements<T>(y)); });
    });
    ctx->save_for_backward({x});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    TORCH_CHECK(!torch::GradMode::is_enabled(),
                "the fused bf16/fp16 GELU has no second derivative; second-order work runs in fp32");
    const auto x = ctx->get_saved_variables()[0];
    const auto g = grads[0].to(x.scalar_type()).contiguous();
    auto dx = torch::empty_like(x);
    dispatch_reduced(x.scalar_type(), [&](auto tag) {
      using T = decltype(tag);
      const auto span = aten_avx512() ? avx512::gelu_tanh_grad_span<T> : avx2::gelu_tanh_grad_span<T>;
      for_blocks(x.numel(), [&](int64_t begin, int64_t end) {
        span(elements<T>(x), elements<T>(g), begin, end, elements<T>(dx));
      });
    });
    return {dx};
  }
};

}  // namespace

bool gelu_tanh_apply(const torch::Tensor& x) {
  return reduced_on_avx2_cpu(x);
}

torch::Tensor gelu_tanh(const torch::Tensor& x) {
  TORCH_CHECK(gelu_tanh_apply(x), "gelu_tanh: bf16/fp16 CPU tensors with AVX2 only");
  return GeluTanhFunction::apply(x);
}

}  // namespace normlab::model::kernels
