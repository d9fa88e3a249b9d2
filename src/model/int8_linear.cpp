#include "model/int8_linear.h"

#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#if __has_include(<fbgemm/Fbgemm.h>)
#include <fbgemm/Fbgemm.h>
#define NORMLAB_FBGEMM 1
#endif

#include "model/kernels/cpu_features.h"
#include "model/kernels/int8_rows.h"

namespace normlab::model {

#ifdef NORMLAB_FBGEMM

struct Int8Weight {
  int64_t n = 0, k = 0;
  std::unique_ptr<fbgemm::PackBMatrix<int8_t>> packed;
  std::vector<float> scale;    // (N) the activations' step times max |w_n| / 127
  std::vector<int32_t> offset;  // (N) the activations' zero point times sum over k of the int8 w_nk
};

namespace {

// Discards warnings: at::quantize_per_channel announces once that quantised tensors are
// deprecated (pytorch/pytorch#184982).
struct Quiet : c10::WarningHandler {
  void process(const c10::Warning&) override {}
};

// The activations' grid (kernels::RowGrid): PyTorch's choice of scale and zero point for the
// range [-1, 1] (quant_utils::ChooseQuantizationParams: scale (max - min) / (qmax - qmin), zero
// point nearbyint(qmin - min / scale)), full uint8 or 7-bit without VNNI.
kernels::RowGrid activation_grid() {
  const int32_t qmax = kernels::avx512_vnni() ? 255 : 127;
  return {static_cast<float>(2.0 / qmax), (qmax + 1) / 2, qmax};
}

}  // namespace

bool int8_available() { return fbgemm::fbgemmSupportedCPU() && kernels::avx2_fma(); }

std::shared_ptr<const Int8Weight> int8_pack(const torch::Tensor& w) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == torch::kFloat && w.device().is_cpu(),
              "int8_pack: a float32 (N,K) weight on the CPU, got ", w.sizes(), " ", w.scalar_type());
  const auto weight = w.detach().contiguous();
  const auto amax = weight.abs().amax(1);
  const auto scale = torch::where(amax > 0, amax / 127, torch::ones_like(amax)).contiguous();
  // PyTorch's rounding of w times 1/scale (fbgemm::Quantize), as tests/decode/check_int8.py's
  // reference quantises
  Quiet quiet;
  c10::WarningUtils::WarningHandlerGuard guard(&quiet);
  const auto q = at::quantize_per_channel(weight, scale.to(torch::kDouble), torch::zeros({w.size(0)}, torch::kLong), 0,
                                          torch::kQInt8)
                     .int_repr()
                     .contiguous();
  auto out = std::make_shared<Int8Weight>();
  out->n = w.size(0);
  out->k = w.size(1);
  out->packed = std::make_unique<fbgemm::PackBMatrix<int8_t>>(fbgemm::matrix_op_t::Transpose, out->k, out->n,
                                                               q.data_ptr<int8_t>(), out->k, nullptr, 1);
  // fbgemm's requantisation multiplies by A_scale * B_scale[j], rounded once
  const auto step = (scale * activation_grid().step).contiguous();
  out->scale.assign(step.data_ptr<float>(), step.data_ptr<float>() + out->n);
  const auto offset = (q.sum(1, false, torch::kInt) * activation_grid().zero_point).contiguous();
  out->offset.assign(offset.data_ptr<int32_t>(), offset.data_ptr<int32_t>() + out->n);
  return out;
}

torch::Tensor int8_linear(const torch::Tensor& x, const Int8Weight& w, const torch::Tensor& b, bool relu) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat && x.size(-1) == w.k, "int8_linear: float32 x with K = ", w.k,
              ", got ", x.sizes(), " ", x.scalar_type());
  const int64_t K = w.k, N = w.n;
  const auto rows = x.reshape({-1, K}).contiguous();  // (M,K)
  const int64_t M = rows.size(0);
  const auto grid = activation_grid();
  std::vector<uint8_t> q(M * K);
  std::vector<float> norm(M);
  auto y = torch::empty({M, N}, rows.options());  // int32 products, then float32 in place
  auto* acc = reinterpret_cast<int32_t*>(y.data_ptr<float>());
  const auto bias = b.defined() ? b.contiguous() : b;
  const bool avx512 = kernels::aten_avx512();
  const auto quantise = avx512 ? kernels::avx512::quantise_rows : kernels::avx2::quantise_rows;
  const auto dequantise = avx512 ? kernels::avx512::dequantise_rows : kernels::avx2::dequantise_rows;
  at::parallel_for(0, M, 16, [&](int64_t begin, int64_t end) {
    quantise(rows.data_ptr<float>(), K, begin, end, grid, q.data(), norm.data());
  });
  // fbgemm divides the product among num_tasks callers by their thread ids (as PyTorch's
  // quantized::linear_dynamic calls it)
  const int num_tasks = at::get_num_threads();
  at::parallel_for(0, num_tasks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      fbgemm::PackAMatrix<uint8_t> packed_a(fbgemm::matrix_op_t::NoTranspose, M, K, q.data(), K, nullptr, 1);
      fbgemm::DoNothing<int32_t, int32_t> nothing;
      fbgemm::memCopy<> keep(nothing);
      fbgemm::fbgemmPacked(packed_a, *w.packed, acc, acc, N, keep, task, num_tasks);
    }
  });
  at::parallel_for(0, M, 16, [&](int64_t begin, int64_t end) {
    dequantise(acc, N, begin, end, norm.data(), w.scale.data(), w.offset.data(),
               bias.defined() ? bias.data_ptr<float>() : nullptr, relu);
  });
  auto shape = x.sizes().vec();
  shape.back() = N;
  return y.view(shape);
}

#else

struct Int8Weight {};

bool int8_available() { return false; }

std::shared_ptr<const Int8Weight> int8_pack(const torch::Tensor&) {
  TORCH_CHECK(false, "int8 decoding needs fbgemm, which this LibTorch was built without");
}

torch::Tensor int8_linear(const torch::Tensor&, const Int8Weight&, const torch::Tensor&, bool) {
  TORCH_CHECK(false, "int8 decoding needs fbgemm, which this LibTorch was built without");
}

#endif

}  // namespace normlab::model
