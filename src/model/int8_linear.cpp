#include "model/int8_linear.h"

#include <algorithm>
#include <limits>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

#include "model/kernels/cpu_features.h"

namespace normlab::model {

namespace {

c10::OperatorHandle op(const char* name) { return c10::Dispatcher::singleton().findSchemaOrThrow(name, ""); }

// Discards warnings: at::quantize_per_channel announces once that quantised tensors are
// deprecated (pytorch/pytorch#184982); they are what fbgemm's prepack takes in this wheel.
struct Quiet : c10::WarningHandler {
  void process(const c10::Warning&) override {}
};

// Sets the quantisation engine to fbgemm while alive (the packed weights carry their kernel,
// so only the prepack reads the engine) and restores the process's choice.
class FbgemmEngine {
 public:
  FbgemmEngine() : was_(at::globalContext().qEngine()) { at::globalContext().setQEngine(at::QEngine::FBGEMM); }
  ~FbgemmEngine() { at::globalContext().setQEngine(was_); }
  FbgemmEngine(const FbgemmEngine&) = delete;
  FbgemmEngine& operator=(const FbgemmEngine&) = delete;

 private:
  at::QEngine was_;
};

}  // namespace

bool int8_available() {
  const auto& engines = at::globalContext().supportedQEngines();
  return std::find(engines.begin(), engines.end(), at::QEngine::FBGEMM) != engines.end() &&
         c10::Dispatcher::singleton().findOp({"quantized::linear_dynamic", ""}).has_value();
}

c10::IValue int8_pack(const torch::Tensor& w) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == torch::kFloat && w.device().is_cpu(),
              "int8_pack: a float32 (N,K) weight on the CPU, got ", w.sizes(), " ", w.scalar_type());
  const auto weight = w.detach().contiguous();
  const auto amax = weight.abs().amax(1);
  const auto scales = torch::where(amax > 0, amax / 127, torch::ones_like(amax)).to(torch::kDouble);
  Quiet quiet;
  c10::WarningUtils::WarningHandlerGuard guard(&quiet);
  const auto q = at::quantize_per_channel(weight, scales, torch::zeros({w.size(0)}, torch::kLong), 0, torch::kQInt8);
  FbgemmEngine fbgemm;
  static const auto prepack = op("quantized::linear_prepack");
  std::vector<c10::IValue> args{q, c10::IValue()};
  prepack.callBoxed(&args);
  return args.front();
}

torch::Tensor int8_linear(const torch::Tensor& x, const c10::IValue& packed, const torch::Tensor& b, bool relu) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat && x.size(-1) >= 2, "int8_linear: float32 x with K >= 2, got ",
              x.sizes(), " ", x.scalar_type());
  const int64_t K = x.size(-1);
  const auto rows = x.reshape({-1, K});  // (M,K)
  const int64_t M = rows.size(0);
  // (M,1) max |x| per row (a row of zeros stays zeros: 0 / tiny). Not linalg_vector_norm(inf):
  // 26x slower than abs and amax at (320, 1024) (bench/int8_gemm.py's normlab int8 column).
  const auto norm = rows.abs().amax(1, true).clamp_min_(std::numeric_limits<float>::min());
  auto input = torch::empty({M + 1, K}, rows.options());
  auto scaled = input.narrow(0, 0, M);
  at::div_out(scaled, rows, norm);
  float* sentinel = input.data_ptr<float>() + M * K;  // the range of the whole input: [-1, 1]
  std::fill(sentinel, sentinel + K, 0.0f);
  sentinel[0] = 1.0f;
  sentinel[1] = -1.0f;
  static const auto dynamic = op("quantized::linear_dynamic");
  std::vector<c10::IValue> args{input, packed, !kernels::avx512_vnni()};  // reduce_range: 7-bit activations
  dynamic.callBoxed(&args);
  const auto y = args.front().toTensor().narrow(0, 0, M);  // (M,N)
  auto out = b.defined() ? torch::addcmul(b, y, norm) : y.mul_(norm);
  if (relu) out.relu_();
  auto shape = x.sizes().vec();
  shape.back() = out.size(1);
  return out.view(shape);
}

}  // namespace normlab::model
