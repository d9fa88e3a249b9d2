#include "model/kernels/cached_attention.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/torch.h>

#include "model/kernels/cached_attention_rows.h"

namespace normlab::model::kernels {
namespace {

constexpr int64_t kRowsPerTask = 16;

template <class T>
void run_rows(const torch::Tensor& q, const std::vector<torch::Tensor>& keys, const std::vector<torch::Tensor>& values,
              const torch::Tensor& rows, torch::Tensor& out) {
  const int64_t n = q.size(0), heads = q.size(1), d = q.size(2), positions = rows.size(1);
  std::vector<const T*> k(keys.size()), v(values.size());
  for (size_t p = 0; p < keys.size(); ++p) {
    k[p] = reinterpret_cast<const T*>(keys[p].data_ptr());
    v[p] = reinterpret_cast<const T*>(values[p].data_ptr());
  }
  const auto* qp = reinterpret_cast<const T*>(q.data_ptr());
  auto* op = reinterpret_cast<T*>(out.data_ptr());
  const int64_t* r = rows.data_ptr<int64_t>();
  at::parallel_for(0, n, kRowsPerTask, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(static_cast<size_t>(heads * (positions + 1 + 2 * d)));
    cached_attention_rows(qp, k.data(), v.data(), r, positions, heads, d, begin, end, scratch.data(), op);
  });
}

}  // namespace

bool cached_attention_fused(const torch::Tensor& q) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool vector_units = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const auto type = q.scalar_type();
  return vector_units && q.device().is_cpu() && q.dim() == 3 && q.size(2) % 8 == 0 &&
         (type == torch::kFloat || type == torch::kBFloat16 || type == torch::kHalf);
#else
  (void)q;
  return false;  // the row kernel is built for x86-64's AVX2 only
#endif
}

torch::Tensor cached_attention(const torch::Tensor& q, const std::vector<torch::Tensor>& keys,
                               const std::vector<torch::Tensor>& values, const torch::Tensor& rows) {
  RECORD_FUNCTION("normlab::cached_attention", std::vector<c10::IValue>());
  TORCH_CHECK(cached_attention_fused(q), "cached_attention: a float32/bf16/fp16 CPU query (N,H,D), D a multiple of 8, "
              "on a CPU with AVX2; got ", q.sizes(), " ", q.scalar_type(), " on ", q.device());
  const int64_t n = q.size(0), heads = q.size(1), d = q.size(2), positions = static_cast<int64_t>(keys.size());
  TORCH_CHECK(positions >= 1 && values.size() == keys.size(), "cached_attention: ", keys.size(), " key and ",
              values.size(), " value positions");
  TORCH_CHECK(rows.scalar_type() == torch::kLong && rows.device().is_cpu() && rows.dim() == 2 && rows.size(0) == n &&
                  rows.size(1) == positions && rows.is_contiguous(),
              "cached_attention: rows must be contiguous int64 (", n, ",", positions, ") on the CPU, got ", rows.sizes());
  const int64_t* r = rows.data_ptr<int64_t>();
  for (int64_t p = 0; p < positions; ++p) {
    for (const auto* x : {&keys[static_cast<size_t>(p)], &values[static_cast<size_t>(p)]}) {
      TORCH_CHECK(x->scalar_type() == q.scalar_type() && x->device().is_cpu() && x->dim() == 3 &&
                      x->size(1) == heads && x->size(2) == d && x->is_contiguous(),
                  "cached_attention: position ", p, " holds ", x->sizes(), " ", x->scalar_type(),
                  "; contiguous (N_p,", heads, ",", d, ") ", q.scalar_type(), " expected");
    }
    const int64_t available = keys[static_cast<size_t>(p)].size(0);
    TORCH_CHECK(values[static_cast<size_t>(p)].size(0) == available, "cached_attention: position ", p, " has ",
                available, " key rows and ", values[static_cast<size_t>(p)].size(0), " value rows");
    for (int64_t i = 0; i < n; ++i)
      TORCH_CHECK(r[i * positions + p] >= 0 && r[i * positions + p] < available, "cached_attention: row ",
                  r[i * positions + p], " of position ", p, "'s ", available);
  }
  auto x = q.contiguous();
  auto out = torch::empty_like(x);
  if (n == 0) return out;
  if (x.scalar_type() == torch::kFloat) run_rows<float>(x, keys, values, rows, out);
  else if (x.scalar_type() == torch::kBFloat16) run_rows<c10::BFloat16>(x, keys, values, rows, out);
  else run_rows<c10::Half>(x, keys, values, rows, out);
  return out;
}

}  // namespace normlab::model::kernels
