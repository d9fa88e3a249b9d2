// A tiny float64 Transformer (512 parameters) and six sentence pairs for Hessian tests, and
// the full Hessian assembled from HVPs of unit vectors.
#pragma once

#include <torch/torch.h>

#include <numeric>
#include <string>
#include <vector>

#include "analysis/hvp.h"
#include "model/seq2seq.h"
#include "../model/tiny_model.h"

namespace normlab::analysis {

inline model::Seq2Seq tiny_model() {
  auto c = test::tiny_config("post-ln");
  c.d_model = 4;
  c.ffn_dim = 8;
  c.encoder_layers = c.decoder_layers = 1;
  c.src_vocab_size = c.tgt_vocab_size = 10;
  model::Seq2Seq net(c);
  net->to(torch::kFloat64);
  model::initialize(net, 5);
  return net;
}

// 6 sentence pairs of 2..6 tokens; in `per_batch`-sentence batches.
inline std::vector<data::Batch> tiny_batches(size_t per_batch) {
  std::vector<data::Sentence> src, tgt;
  for (int i = 0; i < 6; ++i) {
    data::Sentence s, t;
    for (int j = 0; j < 2 + i % 5; ++j) s.push_back(4 + (3 * i + j) % 6);
    for (int j = 0; j < 2 + (i + 2) % 5; ++j) t.push_back(4 + (5 * i + 2 * j) % 6);
    src.push_back(s);
    tgt.push_back(t);
  }
  std::vector<data::Batch> out;
  for (size_t b = 0; b < src.size(); b += per_batch) out.push_back(data::make_batch(src, tgt, b, std::min(src.size(), b + per_batch)));
  return out;
}

inline FullDataHessian tiny_hessian(size_t per_batch, const std::string& params = ".*", bool keep_graphs = false) {
  return FullDataHessian(tiny_model(), tiny_batches(per_batch), train::LossOptions{}, params, torch::kCPU,
                         keep_graphs);
}

// Rows `rows` of the Hessian, each from the HVP of a unit vector: row i = H e_i = column i.
inline torch::Tensor hessian_rows(const FullDataHessian& h, const std::vector<int64_t>& rows) {
  auto m = torch::empty({static_cast<int64_t>(rows.size()), h.dim()}, torch::kFloat64);
  for (size_t r = 0; r < rows.size(); ++r) {
    auto e = torch::zeros({h.dim()}, torch::kFloat64);
    e[rows[r]] = 1.0;
    m[static_cast<int64_t>(r)] = h.hvp(e);
  }
  return m;
}

inline torch::Tensor full_matrix(const FullDataHessian& h) {
  std::vector<int64_t> all(h.dim());
  std::iota(all.begin(), all.end(), 0);
  return hessian_rows(h, all);
}

}  // namespace normlab::analysis
