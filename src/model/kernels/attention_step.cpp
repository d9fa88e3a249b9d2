#include "model/kernels/attention_step.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/torch.h>

#include "model/kernels/attention_step_rows.h"
#include "model/kernels/cpu_features.h"

namespace normlab::model::kernels {
namespace {

constexpr int64_t kRowsPerTask = 16;

template <class T>
const T* typed(const torch::Tensor& x) {
  return x.defined() ? reinterpret_cast<const T*>(x.data_ptr()) : nullptr;
}

// The rows of q (N,H,D) over `positions` positions, with the layout `make_kv<T>()` describes.
template <class MakeKv>
torch::Tensor run_rows(const torch::Tensor& q, int64_t positions, MakeKv&& make_kv) {
  auto x = q.contiguous();
  auto out = torch::empty_like(x);
  const int64_t n = x.size(0), heads = x.size(1), d = x.size(2);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const auto kv = make_kv(tag);
    const T* qp = typed<T>(x);
    T* op = reinterpret_cast<T*>(out.data_ptr());
    at::parallel_for(0, n, kRowsPerTask, [&](int64_t begin, int64_t end) {
      std::vector<float> scratch(static_cast<size_t>(heads * (positions + 1 + 2 * d)));
      attention_step_rows(qp, kv, positions, heads, d, begin, end, scratch.data(), op);
    });
  };
  if (n == 0) return out;
  if (x.scalar_type() == torch::kFloat) run(float{});
  else if (x.scalar_type() == torch::kBFloat16) run(c10::BFloat16{});
  else run(c10::Half{});
  return out;
}

void check_query(const char* what, const torch::Tensor& q) {
  TORCH_CHECK(attention_step_fused(q), what, ": a float32/bf16/fp16 CPU query (N,H,D), D a multiple of 8, on a CPU "
              "with AVX2; got ", q.sizes(), " ", q.scalar_type(), " on ", q.device());
}

void check_operand(const char* what, const char* name, const torch::Tensor& x, const torch::Tensor& q,
                   torch::IntArrayRef sizes) {
  TORCH_CHECK(x.scalar_type() == q.scalar_type() && x.device().is_cpu() && x.sizes() == sizes && x.is_contiguous(), what,
              ": ", name, " holds ", x.sizes(), " ", x.scalar_type(), "; contiguous ", sizes, " ", q.scalar_type(),
              " on the CPU expected");
}

}  // namespace

bool attention_step_fused(c10::ScalarType type, c10::Device device, int64_t head_dim) {
  return avx2_fma() && device.is_cpu() && head_dim % 8 == 0 &&
         (type == torch::kFloat || type == torch::kBFloat16 || type == torch::kHalf);
}

bool attention_step_fused(const torch::Tensor& q) {
  return q.dim() == 3 && attention_step_fused(q.scalar_type(), q.device(), q.size(2));
}

torch::Tensor self_attention_step(const torch::Tensor& q, const std::vector<torch::Tensor>& keys,
                                  const std::vector<torch::Tensor>& values, const torch::Tensor& rows) {
  RECORD_FUNCTION("normlab::self_attention_step", std::vector<c10::IValue>());
  const char* what = "self_attention_step";
  check_query(what, q);
  const int64_t n = q.size(0), heads = q.size(1), d = q.size(2), positions = static_cast<int64_t>(keys.size());
  TORCH_CHECK(positions >= 1 && values.size() == keys.size(), what, ": ", keys.size(), " key and ", values.size(),
              " value positions");
  TORCH_CHECK(rows.scalar_type() == torch::kLong && rows.device().is_cpu() && rows.dim() == 2 && rows.size(0) == n &&
                  rows.size(1) == positions && rows.is_contiguous(),
              what, ": rows must be contiguous int64 (", n, ",", positions, ") on the CPU, got ", rows.sizes());
  const int64_t* r = rows.data_ptr<int64_t>();
  for (int64_t p = 0; p < positions; ++p) {
    const auto& k = keys[static_cast<size_t>(p)];
    const int64_t available = k.dim() == 3 ? k.size(0) : 0;
    check_operand(what, "a position's keys", k, q, {available, heads, d});
    check_operand(what, "a position's values", values[static_cast<size_t>(p)], q, {available, heads, d});
    for (int64_t i = 0; i < n; ++i)
      TORCH_CHECK(r[i * positions + p] >= 0 && r[i * positions + p] < available, what, ": row ",
                  r[i * positions + p], " of position ", p, "'s ", available);
  }
  std::vector<const void*> k(keys.size()), v(values.size());
  for (size_t p = 0; p < keys.size(); ++p) k[p] = keys[p].data_ptr(), v[p] = values[p].data_ptr();
  return run_rows(q, positions, [&](auto tag) {
    using T = decltype(tag);
    return PositionSlabs<T>{reinterpret_cast<const T* const*>(k.data()), reinterpret_cast<const T* const*>(v.data()),
                            r};
  });
}

torch::Tensor encoder_attention_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const torch::Tensor& bias, const torch::Tensor& sentences) {
  RECORD_FUNCTION("normlab::encoder_attention_step", std::vector<c10::IValue>());
  const char* what = "encoder_attention_step";
  check_query(what, q);
  const int64_t n = q.size(0), heads = q.size(1), d = q.size(2);
  TORCH_CHECK(k.dim() == 4 && k.size(1) == heads && k.size(3) == d && k.stride(3) == 1 && v.sizes() == k.sizes() &&
                  v.strides() == k.strides() && k.scalar_type() == q.scalar_type() &&
                  v.scalar_type() == q.scalar_type() && k.device().is_cpu() && v.device().is_cpu(),
              what, ": keys ", k.sizes(), " and values ", v.sizes(), " must be (B,", heads, ",S,", d, ") ",
              q.scalar_type(), " on the CPU with the same strides, the last one 1");
  const int64_t b = k.size(0), s = k.size(2);
  if (bias.defined()) check_operand(what, "bias", bias, q, {b, heads, 1, s});
  const int64_t current = sentences.defined() ? sentences.numel() : b;
  TORCH_CHECK(s > 0 && current > 0 && n % current == 0, what, ": ", n, " query rows for ", current, " sentences of ",
              s, " positions");
  const int64_t* sp = nullptr;
  if (sentences.defined()) {
    TORCH_CHECK(sentences.scalar_type() == torch::kLong && sentences.device().is_cpu() && sentences.dim() == 1 &&
                    sentences.is_contiguous(),
                what, ": sentences must be contiguous int64 (B') on the CPU");
    sp = sentences.data_ptr<int64_t>();
    for (int64_t i = 0; i < current; ++i)
      TORCH_CHECK(sp[i] >= 0 && sp[i] < b, what, ": sentence ", sp[i], " of ", b);
  }
  return run_rows(q, s, [&](auto tag) {
    using T = decltype(tag);
    return SentenceBlocks<T>{typed<T>(k), typed<T>(v), typed<T>(bias), sp, n / current,
                             k.stride(0),  k.stride(1), k.stride(2)};
  });
}

}  // namespace normlab::model::kernels
