// --optimizer muon: Muon (Jordan et al. 2024, "Muon: An optimizer for hidden layers in neural
// networks"; Liu et al. 2025, "Muon is Scalable for LLM Training", arXiv 2502.16982) on the hidden
// weight matrices (muon.h says which), AdamW on the other parameters, as torch.optim.Muon
// (torch/optim/_muon.py of PyTorch 2.13, _single_tensor_muon) and torch.optim.AdamW side by side
// compute them, operation for operation (tests/train/optimizer_reference.py compares with both).
// For a matrix p (A x B) with gradient g at rate lr (lr scale included):
//   M  = mu M + (1 - mu) g                 (M.lerp_(g, 1 - mu); M_0 = 0)
//   U  = (1 - mu) g + mu M                 (Nesterov, --muon-nesterov; without it U = M)
//   O  = NS(U)                             (Newton-Schulz, below, in bfloat16)
//   p *= 1 - lr wd                         (decoupled weight decay at the unadjusted lr)
//   p -= lr s O                            (s: --muon-adjust-lr, MuonAdjustLr)
// The AdamW part is adam.cpp's AdamW (its fused kernel) with --betas, --eps and --weight-decay.
// State: "momentum_buffer.<name>" (M) for Muon's matrices, the Adam family's step., exp_avg. and
// exp_avg_sq. for AdamW's parameters.
#include "train/optimizers/muon.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "train/optimizers/adam_family.h"
#include "train/optimizers/optimizers.h"

namespace normlab::train {

bool muon_updates(const std::string& name, const torch::Tensor& p) {
  if (p.dim() != 2) return false;
  size_t begin = 0;
  while (begin <= name.size()) {
    const size_t dot = std::min(name.find('.', begin), name.size());
    const auto part = name.substr(begin, dot - begin);
    for (const char* module : kMuonAdamWModules)
      if (part == module) return false;
    begin = dot + 1;
  }
  return true;
}

namespace {

constexpr const char* kMomentumBuffer = "momentum_buffer";

// Jordan et al.'s quintic Newton-Schulz coefficients (a, b, c), chosen to maximise the slope at
// zero; in 5 steps the iteration takes every singular value of a matrix of spectral norm <= 1
// into roughly (0.5, 1.5) (Jordan et al.; 0.68-1.14 measured on random 4 x 6 matrices),
// not to 1. torch.optim.Muon's DEFAULT_A, DEFAULT_B, DEFAULT_C.
constexpr double kA = 3.4445, kB = -4.7750, kC = 2.0315;
// The normalisation's floor, torch.optim.Muon's eps (EPS); not --eps, which is AdamW's.
constexpr double kNormFloor = 1e-7;

// torch's _zeropower_via_newtonschulz: X = U in bfloat16, transposed when A > B (so that X X^T is
// the smaller Gram matrix), X /= max(||X||_F, eps) (spectral norm <= 1), then `steps` times
// G = X X^T, X = a X + (b G + c G G) X; U's shape, in bfloat16, close to the orthogonal factor
// of U's polar decomposition (U' S' V'^T in place of U' V'^T, Jordan et al.). The same ATen calls in
// the same order, so that the results are torch's bit for bit.
torch::Tensor newton_schulz(const torch::Tensor& u, int64_t steps) {
  auto x = u.to(torch::kBFloat16);
  if (x.is_same(u)) x = x.clone();  // torch would divide a bfloat16 U (a parameter's M) in place
  const bool tall = u.size(0) > u.size(1);
  if (tall) x = x.t();
  x.div_(torch::linalg_vector_norm(x, 2).clamp(kNormFloor));
  for (int64_t k = 0; k < steps; ++k) {
    const auto gram = torch::matmul(x, x.t());
    const auto gram_update = torch::addmm(gram, gram, gram, /*beta=*/kB, /*alpha=*/kC);  // b G + c G G
    x = torch::addmm(x, gram_update, x, /*beta=*/kA);                                   // a X + (b G + c G G) X
  }
  return tall ? x.t() : x;
}

// s of an A x B matrix (torch's _adjust_lr): sqrt(max(1, A/B)) (Jordan et al.: an update of RMS
// ~1/sqrt(B) for A >= B), or 0.2 sqrt(max(A, B)) (Liu et al. 2025: an orthogonal A x B matrix
// has RMS sqrt(1/max(A, B)), so the update's RMS is 0.2, about AdamW's).
double adjusted_lr(double lr, const torch::Tensor& p, MuonAdjustLr how) {
  const double a = static_cast<double>(p.size(0)), b = static_cast<double>(p.size(1));
  const double ratio = how == MuonAdjustLr::kOriginal ? std::sqrt(std::max(1.0, a / b)) : 0.2 * std::sqrt(std::max(a, b));
  return lr * ratio;
}

class Muon final : public OptimizerAlgorithm {
 public:
  Muon(const OptimizerConfig& config, size_t parameters)
      : OptimizerAlgorithm(config), adamw_(make_adamw_family(config, parameters)), momentum_(parameters) {}

  // Muon's matrices one by one (torch.optim.Muon has no multi-tensor form), then the others in
  // AdamW's fused kernel, one call per group of equal lr scale, dtype and device.
  void step(const NamedTensors& params, const std::vector<size_t>& ready, const std::vector<double>& lr_scales,
            double lr) override {
    std::vector<size_t> by_adamw;
    for (size_t i : ready) {
      const auto& [name, p] = params[i];
      if (muon_updates(name, p))
        update(p, p.grad(), i, lr * lr_scales[i]);
      else
        by_adamw.push_back(i);
    }
    if (!by_adamw.empty()) adamw_->step(params, by_adamw, lr_scales, lr);
  }

  void save_state(const NamedTensors& params, TensorMap& out) const override {
    adamw_->save_state(params, out);  // AdamW's parameters alone have moments
    for (size_t i = 0; i < params.size(); ++i)
      if (momentum_[i].defined()) out[state_key(kMomentumBuffer, params[i].first)] = momentum_[i].detach().clone();
  }

  // Each parameter's state must be of its part: AdamW's moments for a Muon matrix are refused here,
  // a momentum buffer of an AdamW parameter stays unread (Optimizer::load_state refuses it).
  void load_state(StateReader& in) override {
    adamw_->load_state(in);
    const auto& params = in.parameters();
    for (size_t i = 0; i < momentum_.size(); ++i) {
      const auto& [name, p] = params[i];
      if (!muon_updates(name, p)) {
        momentum_[i] = torch::Tensor();
        continue;
      }
      if (adamw_->has_moments(i))
        throw state_error("'" + name + "' is a matrix that --optimizer muon updates with Muon, but the state has " +
                          "AdamW's moments for it (another optimiser's state?)");
      momentum_[i] = in.tensor(kMomentumBuffer, i);
    }
  }

  // None known for Muon (docs/optimisers.md): its orthogonalised step has singular values ~lr s
  // whatever the gradient's size, so on a quadratic it does not diverge above a curvature as
  // gradient descent and Adam do (Cohen et al. 2021, 2022), and a mixture with AdamW has no one
  // threshold either. Curvature refuses muon.
  std::optional<double> stability_threshold(double) const override { return std::nullopt; }

 protected:
  // One Muon matrix, torch's _single_tensor_muon for one parameter.
  void update(const torch::Tensor& p, const torch::Tensor& grad, size_t i, double lr) override {
    const auto& c = config();
    auto& momentum = momentum_[i];
    if (!momentum.defined()) momentum = torch::zeros_like(p, torch::MemoryFormat::Preserve);
    const double mu = c.muon_momentum;
    momentum.lerp_(grad, 1.0 - mu);
    const auto u = c.muon_nesterov ? grad.lerp(momentum, mu) : momentum;
    const auto o = newton_schulz(u, c.muon_ns_steps);
    const double wd = c.decoupled_weight_decay();  // --weight-decay, or its independent form
    if (wd != 0.0) p.mul_(1.0 - lr * wd);          // torch multiplies by 1 - lr * 0 too: the same bits
    p.add_(o, -adjusted_lr(lr, p, c.muon_adjust_lr));
  }

 private:
  std::unique_ptr<AdamFamily> adamw_;   // the AdamW part, with moments for its parameters only
  std::vector<torch::Tensor> momentum_;  // M of Muon's matrices, parallel to the parameters; undefined else
};

}  // namespace

std::unique_ptr<OptimizerAlgorithm> make_muon(const OptimizerConfig& config, size_t parameters) {
  return std::make_unique<Muon>(config, parameters);
}

}  // namespace normlab::train
