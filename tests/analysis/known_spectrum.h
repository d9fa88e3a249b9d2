// Symmetric matrices whose spectra are known by construction: A = Q diag(lambda) Q^T with Q
// orthogonal (the QR factor of a seeded Gaussian matrix).
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <vector>

namespace normlab::analysis {

inline torch::Tensor with_spectrum(const std::vector<double>& eigs, uint64_t seed) {
  const auto n = static_cast<int64_t>(eigs.size());
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto q = std::get<0>(torch::linalg_qr(torch::randn({n, n}, gen, torch::kFloat64)));
  auto a = q.matmul(torch::diag(torch::tensor(eigs, torch::kFloat64))).matmul(q.t());
  return (a + a.t()) / 2;  // (n,n), symmetric to the last bit
}

}  // namespace normlab::analysis
