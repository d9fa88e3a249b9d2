// Full-data Hessian-vector products of a tiny Transformer (float64, 512 parameters): the
// full Hessian assembled from HVPs of unit vectors, checked for symmetry and against
// torch::linalg_eigvalsh, central finite differences of gradients, batching and Hutchinson.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <numeric>

#include "analysis/hessian_blocks.h"
#include "analysis/hessian_run.h"
#include "analysis/hutchinson.h"
#include "analysis/hvp.h"
#include "analysis/lanczos.h"
#include "tiny_hessian.h"

namespace normlab::analysis {
namespace {

// ctest runs each test in its own process: the full matrix is built only by tests that use it.
class TinyHessian : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    torch::set_num_threads(1);  // tiny ops: thread hand-offs would cost more than the work
    hessian_ = new FullDataHessian(tiny_hessian(6));  // one batch: the fewest passes per HVP
  }
  static void TearDownTestSuite() {
    delete hessian_;
    delete matrix_;
  }
  static const torch::Tensor& matrix() {
    if (!matrix_) matrix_ = new torch::Tensor(full_matrix(*hessian_));
    return *matrix_;
  }
  static FullDataHessian* hessian_;
  static torch::Tensor* matrix_;
};
FullDataHessian* TinyHessian::hessian_ = nullptr;
torch::Tensor* TinyHessian::matrix_ = nullptr;

TEST_F(TinyHessian, IsSymmetricAndIndefinite) {
  const auto& h = matrix();
  EXPECT_GT(hessian_->dim(), 500);
  EXPECT_LT((h - h.t()).abs().max().item<double>(), 1e-10 * h.abs().max().item<double>());
  auto eig = torch::linalg_eigvalsh(h);
  EXPECT_LT(eig[0].item<double>(), 0.0);  // at initialisation the Hessian is indefinite
  EXPECT_GT(eig[-1].item<double>(), 0.0);
}

TEST_F(TinyHessian, LanczosExtremesMatchEigvalsh) {
  auto eig = torch::linalg_eigvalsh((matrix() + matrix().t()) / 2);
  const double hi = eig[-1].item<double>(), lo = eig[0].item<double>();
  const double radius = std::max(std::abs(hi), std::abs(lo));
  auto s = lanczos_start(rademacher(hessian_->dim(), 1, torch::kFloat64));
  lanczos_continue(hessian_->as_operator(), 120, s);
  const auto e = tridiagonal_eigen(s.alpha, s.beta);
  EXPECT_NEAR(e.nodes.back(), hi, 1e-6 * radius);
  EXPECT_NEAR(e.nodes.front(), lo, 1e-6 * radius);
}

TEST_F(TinyHessian, HutchinsonWithinThreeStandardErrors) {
  const double exact = matrix().trace().item<double>();
  const auto t = summarize_trace(hutchinson_samples(hessian_->as_operator(), hessian_->dim(), torch::kFloat64, 3, 60));
  EXPECT_LT(std::abs(t.trace - exact), 3 * t.standard_error) << "exact " << exact << " estimate " << t.trace;
}

// ||Hv - (g(theta + h v) - g(theta - h v)) / 2h|| / ||Hv|| for a random unit v, and Hv.
std::pair<double, torch::Tensor> central_difference_error(FullDataHessian& hessian) {
  const auto n = hessian.dim();
  auto v = torch::randn({n}, torch::kFloat64);
  v /= v.norm();
  const double step = 1e-5;
  auto shift = [&](double by) {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < hessian.params().size(); ++i) {
      const auto& p = hessian.params()[i].second;
      p.add_(v.narrow(0, hessian.offset(i), p.numel()).view(p.sizes()), by);
    }
  };
  shift(step);
  auto plus = hessian.gradient().first.clone();
  shift(-2 * step);
  auto minus = hessian.gradient().first.clone();
  shift(step);
  auto fd = (plus - minus) / (2 * step);
  auto hv = hessian.hvp(v);
  return {(fd - hv).norm().item<double>() / hv.norm().item<double>(), hv};
}

TEST_F(TinyHessian, MatchesCentralDifferencesOfGradients) {
  EXPECT_LT(central_difference_error(*hessian_).first, 1e-7);
}

// The z-loss (train/loss.h) is part of the loss whose Hessian is taken: the products still
// match central differences of gradients, and differ from those without it.
TEST(HessianOfZLoss, MatchesCentralDifferencesAndChangesTheProduct) {
  torch::manual_seed(11);
  FullDataHessian with(tiny_model(), tiny_batches(2),
                       train::LossOptions{0.1, train::LabelSmoothingFormula::kUniform, 0.5}, ".*", torch::kCPU);
  torch::manual_seed(11);
  const auto [error, hv] = central_difference_error(with);
  EXPECT_LT(error, 1e-7);
  torch::manual_seed(11);
  FullDataHessian without(tiny_model(), tiny_batches(2), train::LossOptions{}, ".*", torch::kCPU);
  torch::manual_seed(11);
  const auto [error0, hv0] = central_difference_error(without);
  EXPECT_GT((hv - hv0).norm().item<double>(), 1e-3 * hv0.norm().item<double>());
}

TEST_F(TinyHessian, BatchingDoesNotChangeTheProduct) {
  auto pairs = tiny_hessian(2);
  auto single = tiny_hessian(1);
  ASSERT_EQ(pairs.tokens(), hessian_->tokens());
  auto v = torch::randn({hessian_->dim()}, torch::kFloat64);
  auto ref = hessian_->hvp(v);  // the whole set as one batch
  EXPECT_LT((pairs.hvp(v) - ref).abs().max().item<double>(), 1e-13 * ref.abs().max().item<double>());
  EXPECT_LT((single.hvp(v) - ref).abs().max().item<double>(), 1e-13 * ref.abs().max().item<double>());
}

// --keep-graphs: products after the first reuse each batch's first-order graph; every product,
// for different directions and again for the first, equals the whole set's as one fresh batch,
// and equals bit for bit the product of the same batches with fresh graphs (--curvature-every and
// --warmup auto keep a one-batch probe set's graphs and rely on that: their records are those
// measured without, analysis::keep_probe_graphs).
TEST_F(TinyHessian, KeptGraphsGiveTheSameProducts) {
  auto kept = tiny_hessian(2, ".*", /*keep_graphs=*/true);
  auto fresh = tiny_hessian(2);
  std::vector<torch::Tensor> vs;
  for (int i = 0; i < 3; ++i) vs.push_back(torch::randn({hessian_->dim()}, torch::kFloat64));
  vs.push_back(vs.front());
  for (const auto& v : vs) {
    auto ref = hessian_->hvp(v);
    const auto product = kept.hvp(v);
    EXPECT_LT((product - ref).abs().max().item<double>(), 1e-13 * ref.abs().max().item<double>());
    EXPECT_TRUE(torch::equal(product, fresh.hvp(v)));
  }
}

// Results are written into the previous result's memory only once the caller has let go of
// it: products and gradients the caller still holds, or a view of, keep their values.
TEST_F(TinyHessian, ResultsHeldByTheCallerAreNeverOverwritten) {
  auto v = torch::randn({hessian_->dim()}, torch::kFloat64), w = torch::randn({hessian_->dim()}, torch::kFloat64);
  auto hv = hessian_->hvp(v);
  const auto hv_copy = hv.clone();
  auto head = hessian_->hvp(w).narrow(0, 0, 7);
  const auto head_copy = head.clone();
  auto g = hessian_->gradient().first;
  const auto g_copy = g.clone();
  hessian_->hvp(v + w);
  hessian_->gradient();
  EXPECT_TRUE(torch::equal(hv, hv_copy));
  EXPECT_TRUE(torch::equal(head, head_copy));
  EXPECT_TRUE(torch::equal(g, g_copy));
  // A result dropped at once lends its memory to the next product, which is still exact.
  const void* first = hessian_->hvp(v).data_ptr();
  auto again = hessian_->hvp(v);
  EXPECT_EQ(again.data_ptr(), first);
  EXPECT_LT((again - hv_copy).abs().max().item<double>(), 1e-13 * hv_copy.abs().max().item<double>());
}

// --params: the Hessian of a subset is the principal sub-matrix of the full one.
TEST_F(TinyHessian, ParameterSubsetIsPrincipalSubmatrix) {
  auto sub = tiny_hessian(2, "^decoder\\.layers\\.0\\.fc");
  std::vector<int64_t> idx;
  for (size_t i = 0; i < hessian_->params().size(); ++i) {
    const auto& name = hessian_->params()[i].first;
    if (name.rfind("decoder.layers.0.fc", 0) != 0) continue;
    for (int64_t j = 0; j < hessian_->params()[i].second.numel(); ++j) idx.push_back(hessian_->offset(i) + j);
  }
  ASSERT_EQ(sub.dim(), static_cast<int64_t>(idx.size()));
  // Only the sub-matrix's rows of the full Hessian are needed (76 HVPs instead of 512).
  auto block = hessian_rows(*hessian_, idx).index_select(1, torch::tensor(idx, torch::kInt64));
  auto v = torch::randn({sub.dim()}, torch::kFloat64);
  EXPECT_LT((sub.hvp(v) - block.mv(v)).abs().max().item<double>(), 1e-12 * block.abs().max().item<double>() * 10);
  EXPECT_THROW(tiny_hessian(2, "^no such parameter$"), std::invalid_argument);
}

// Every sub-layer block's extreme Ritz values, with as many Lanczos steps as coordinates,
// against eigvalsh of the dense Hessian's principal submatrix on the block's coordinates.
TEST_F(TinyHessian, SublayerBlocksMatchPrincipalSubmatrices) {
  const LinearOperator hvp = [&](const torch::Tensor& v) { return hessian_->hvp(v); };
  const auto blocks = parameter_blocks(*hessian_, sublayer_block);
  EXPECT_GE(blocks.size(), 10u);
  for (const auto& b : blocks) {
    std::vector<torch::Tensor> index;
    for (const auto& [offset, length] : b.ranges) index.push_back(torch::arange(offset, offset + length));
    const auto rows = torch::cat(index);
    const auto eig = torch::linalg_eigvalsh(matrix().index_select(0, rows).index_select(1, rows));
    const auto e = block_spectrum(hvp, hessian_->dim(), b, b.size, 3, torch::kFloat64);
    const double scale = eig.abs().max().item<double>() + 1e-12;
    EXPECT_NEAR(e.nodes.back(), eig[-1].item<double>(), 1e-6 * scale) << b.name;
    EXPECT_NEAR(e.nodes.front(), eig[0].item<double>(), 1e-6 * scale) << b.name;
  }
}

TEST(HessianBlocks, SublayerNames) {
  EXPECT_EQ(sublayer_block("encoder.layers.3.self_attn.q_proj.weight"), "encoder.layers.3.self_attn.qk");
  EXPECT_EQ(sublayer_block("decoder.layers.0.encoder_attn.k_norm.bias"), "decoder.layers.0.encoder_attn.qk");
  EXPECT_EQ(sublayer_block("decoder.layers.0.encoder_attn.out_proj.bias"), "decoder.layers.0.encoder_attn.vo");
  EXPECT_EQ(sublayer_block("encoder.layers.1.fc2.weight"), "encoder.layers.1.ffn");
  EXPECT_EQ(sublayer_block("encoder.layers.1.final_layer_norm.weight"), "encoder.layers.1.norms");
  EXPECT_EQ(sublayer_block("encoder.layers.1.ffn_output_layer_norm.alpha"), "encoder.layers.1.norms");
  EXPECT_EQ(sublayer_block("decoder.layers.2.self_attn_omega"), "decoder.layers.2.norms");
  EXPECT_EQ(sublayer_block("encoder.embed_tokens.weight"), "embeddings");
  EXPECT_EQ(sublayer_block("decoder.layer_norm.weight"), "other");
}

TEST(HessianBlocks, NamesFollowLayers) {
  EXPECT_EQ(parameter_block("encoder.layers.3.fc1.weight"), "encoder.layers.3");
  EXPECT_EQ(parameter_block("decoder.layers.11.self_attn.k_proj.bias"), "decoder.layers.11");
  EXPECT_EQ(parameter_block("encoder.embed_tokens.weight"), "embeddings");
  EXPECT_EQ(parameter_block("decoder.output_projection.weight"), "embeddings");
  EXPECT_EQ(parameter_block("decoder.layer_norm.weight"), "other");
}

}  // namespace
}  // namespace normlab::analysis
