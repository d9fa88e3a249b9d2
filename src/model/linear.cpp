#include "model/linear.h"

#include <map>
#include <optional>
#include <unordered_set>
#include <utility>

#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include "model/int8_linear.h"
#include "model/kernels/cpu_features.h"

namespace normlab::model {

struct PackedWeights::State {
  // mkldnn::_reorder_linear_weight, _linear_pointwise; absent in a LibTorch without oneDNN
  std::optional<c10::OperatorHandle> reorder, product;
  bool fp32 = false;                        // float32 products packed (AVX-512 only: where it pays)
  bool bf16 = false;                        // bf16 products packed (where oneDNN's bf16 reorder runs)
  bool int8 = false;                        // float32 products in int8 (--precision int8)
  std::unordered_set<const c10::TensorImpl*> parameters;
  // (parameter, dtype) -> the weight in oneDNN's layout, or its int8 form for kQInt8; each entry
  // also keeps its parameter alive, so that no other tensor can take its address while the scope
  // lives.
  struct Entry {
    torch::Tensor parameter;
    c10::IValue onednn;
    std::shared_ptr<const Int8Weight> int8;
  };
  std::map<std::pair<const c10::TensorImpl*, c10::ScalarType>, Entry> packed;
};

namespace {

thread_local PackedWeights::State* current = nullptr;

torch::Tensor call(const c10::OperatorHandle& op, std::vector<c10::IValue> args) {
  op.callBoxed(&args);
  return args.front().toTensor();
}

std::optional<c10::OperatorHandle> find(const char* name) {
  return c10::Dispatcher::singleton().findOp({name, ""});
}

// The dtype of the product when the scope takes it, else nullopt: float32 (where packing pays
// for it), the bf16 of an active CPU autocast, or kQInt8 for float32 in an int8 scope. float64,
// fp16 (no CPU use) and anything on another device take at::linear.
std::optional<c10::ScalarType> packed_dtype(const PackedWeights::State& s, const torch::Tensor& x,
                                            const torch::Tensor& w) {
  if (c10::GradMode::is_enabled() || !x.device().is_cpu() || x.numel() == 0 || w.scalar_type() != c10::kFloat ||
      !s.parameters.count(w.unsafeGetTensorImpl()))
    return std::nullopt;
  if (x.scalar_type() != c10::kFloat && x.scalar_type() != c10::kBFloat16) return std::nullopt;
  if (at::autocast::is_autocast_enabled(c10::DeviceType::CPU)) {
    const auto dtype = at::autocast::get_autocast_dtype(c10::DeviceType::CPU);
    return dtype == c10::kBFloat16 && s.bf16 ? std::optional(dtype) : std::nullopt;
  }
  if (x.scalar_type() != c10::kFloat) return std::nullopt;
  if (s.int8) return c10::kQInt8;
  return s.fp32 ? std::optional(c10::kFloat) : std::nullopt;
}

// linear() and linear_relu(): with the ReLU in oneDNN's epilogue on the packed path.
torch::Tensor product(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, bool relu) {
  const auto dtype = current ? packed_dtype(*current, x, w) : std::nullopt;
  if (!dtype) {
    auto y = torch::linear(x, w, b);
    return relu ? torch::relu(y) : y;
  }
  auto& entry = current->packed[{w.unsafeGetTensorImpl(), *dtype}];
  if (*dtype == c10::kQInt8) {
    if (!entry.parameter.defined()) entry = {w, {}, int8_pack(w)};
    return int8_linear(x, *entry.int8, b, relu);
  }
  if (!entry.parameter.defined()) {
    // autocast_operand: the bf16 cast autocast would hand at::linear (cached per scope).
    entry = {w, call(*current->reorder, {*dtype == c10::kFloat ? w : autocast_operand(w), c10::IValue()}), {}};
  }
  const auto bias = b.defined() ? c10::IValue(*dtype == c10::kFloat ? b : autocast_operand(b)) : c10::IValue();
  return call(*current->product, {x.to(*dtype).contiguous(), entry.onednn, bias, std::string(relu ? "relu" : "none"),
                                  c10::List<std::optional<c10::Scalar>>(), c10::IValue()});
}

}  // namespace

PackedWeights::PackedWeights(const torch::nn::Module& module, Precision precision) {
  if (current) return;
  const bool int8 = precision == Precision::kInt8;
  TORCH_CHECK(!int8 || int8_available(), "int8 decoding needs fbgemm, which this LibTorch was built without");
  auto reorder_op = find("mkldnn::_reorder_linear_weight"), product_op = find("mkldnn::_linear_pointwise");
  const bool onednn = reorder_op && product_op;
  if (!onednn && !int8) return;
  state_ = std::make_unique<State>(State{reorder_op, product_op, onednn && kernels::aten_avx512(),
                                         onednn && kernels::onednn_bf16(), int8, {}, {}});
  for (const auto& p : module.parameters()) state_->parameters.insert(p.unsafeGetTensorImpl());
  current = state_.get();
}

PackedWeights::~PackedWeights() {
  if (state_) current = nullptr;
}

bool PackedWeights::int8_now() { return current && current->int8 && !c10::GradMode::is_enabled(); }

size_t PackedWeights::packed() const { return state_ ? state_->packed.size() : 0; }

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  return product(x, w, b, false);
}

torch::Tensor linear_relu(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return product(x, layer->weight, layer->bias, true);
}

}  // namespace normlab::model
