#include "model/kernels/log_softmax_terms.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "model/kernels/cpu_features.h"
#include "model/kernels/reduced.h"
#include "model/kernels/log_softmax_terms_rows.h"

namespace normlab::model::kernels {
namespace {

constexpr int64_t kRowsPerTask = 16;

class LogSoftmaxTermsFunction : public torch::autograd::Function<LogSoftmaxTermsFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const torch::Tensor& logits, const torch::Tensor& target) {
    auto x = logits.contiguous();
    auto t = target.contiguous();
    const int64_t n = x.size(0), v = x.size(1);
    auto f32 = x.options().dtype(torch::kFloat);
    auto lse = torch::empty({n}, f32), nll = torch::empty({n}, f32), smooth = torch::empty({n}, f32);
    dispatch_reduced(x.scalar_type(), [&](auto tag) {
      using T = decltype(tag);
      const T* px = reinterpret_cast<const T*>(x.data_ptr());
      const auto rows = aten_avx512() ? avx512::log_softmax_terms_rows<T> : avx2::log_softmax_terms_rows<T>;
      at::parallel_for(0, n, kRowsPerTask, [&](int64_t begin, int64_t end) {
        rows(px, t.data_ptr<int64_t>(), v, begin, end, lse.data_ptr<float>(), nll.data_ptr<float>(),
             smooth.data_ptr<float>());
      });
    });
    ctx->save_for_backward({x, t, lse});
    return {nll, smooth};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    TORCH_CHECK(!torch::GradMode::is_enabled(),
                "the fused bf16/fp16 loss has no second derivative; second-order work runs in fp32");
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &t = saved[1], &lse = saved[2];
    const int64_t n = x.size(0), v = x.size(1);
    auto zeros_if_undefined = [&](const torch::Tensor& g) {
      return g.defined() ? g.to(torch::kFloat).contiguous() : torch::zeros({n}, lse.options());
    };
    const auto g_nll = zeros_if_undefined(grads[0]), g_smooth = zeros_if_undefined(grads[1]);
    auto grad = torch::empty_like(x);
    dispatch_reduced(x.scalar_type(), [&](auto tag) {
      using T = decltype(tag);
      const auto rows = aten_avx512() ? avx512::log_softmax_terms_grad_rows<T> : avx2::log_softmax_terms_grad_rows<T>;
      at::parallel_for(0, n, kRowsPerTask, [&](int64_t begin, int64_t end) {
        rows(reinterpret_cast<const T*>(x.data_ptr()), t.data_ptr<int64_t>(), lse.data_ptr<float>(),
             g_nll.data_ptr<float>(), g_smooth.data_ptr<float>(), v, begin, end, reinterpret_cast<T*>(grad.data_ptr()));
      });
    });
    return {grad, torch::Tensor()};
  }
};

}  // namespace

bool log_softmax_terms_apply(const torch::Tensor& logits) {
  return reduced_on_avx2_cpu(logits);
}

LogSoftmaxTerms log_softmax_terms(const torch::Tensor& logits, const torch::Tensor& target) {
  TORCH_CHECK(log_softmax_terms_apply(logits), "log_softmax_terms: bf16/fp16 CPU logits with AVX2 only");
  TORCH_CHECK(logits.dim() == 2 && target.dim() == 1 && target.size(0) == logits.size(0),
              "log_softmax_terms: logits (N,V) and target (N), got ", logits.sizes(), " and ", target.sizes());
  if (target.numel() > 0) {
    const auto [lo, hi] = torch::aminmax(target);  // one pass
    TORCH_CHECK(lo.item<int64_t>() >= 0 && hi.item<int64_t>() < logits.size(1),
                "log_softmax_terms: a target id outside [0, ", logits.size(1), ")");
  }
  auto out = LogSoftmaxTermsFunction::apply(logits, target);
  return {out[0], out[1]};
}

}  // namespace normlab::model::kernels
