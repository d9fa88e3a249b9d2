#include "analysis/hessian_run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <cmath>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>

#include <torch/torch.h>

#include "analysis/hutchinson.h"
#include "analysis/lanczos.h"
#include "core/file_io.h"
#include "core/hash.h"
#include "model/checkpoint.h"

namespace normlab::analysis {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kStateFile = "lanczos_state.pt";

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

torch::Tensor doubles(const std::vector<double>& v) {
  return torch::tensor(v, torch::kFloat64).reshape({static_cast<int64_t>(v.size())});
}

std::vector<double> to_doubles(const torch::Tensor& t) {
  auto c = t.contiguous().to(torch::kFloat64);
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

// Finished probes (coefficients only) and the probe in progress (with its basis).
struct Progress {
  std::vector<LanczosState> done;
  LanczosState current;  // basis undefined between probes
  double wall_s = 0.0;   // time spent by earlier runs
};

void save_state(const fs::path& path, uint64_t fingerprint, const Progress& p,
                const LanczosState& current, double wall_s) {
  model::TensorMap t;
  t["fingerprint"] = torch::tensor(static_cast<int64_t>(fingerprint), torch::kInt64);
  t["wall_s"] = torch::tensor(wall_s, torch::kFloat64);
  t["probes_done"] = torch::tensor(static_cast<int64_t>(p.done.size()), torch::kInt64);
  auto put = [&t](const std::string& prefix, const LanczosState& s) {
    t[prefix + "alpha"] = doubles(s.alpha);
    t[prefix + "beta"] = doubles(s.beta);
    t[prefix + "invariant"] = torch::tensor(static_cast<int64_t>(s.invariant), torch::kInt64);
  };
  for (size_t i = 0; i < p.done.size(); ++i) put("done/" + std::to_string(i) + "/", p.done[i]);
  if (current.basis.defined()) {
    put("current/", current);
    t["current/basis"] = current.basis;
  }
  model::save_tensors(path.string(), t);
}

Progress load_state(const fs::path& path, uint64_t fingerprint) {
  auto t = model::load_tensors(path.string());
  auto get = [&](const std::string& key) {
    auto it = t.find(key);
    if (it == t.end()) throw std::runtime_error(path.string() + ": not a Lanczos state (no " + key + ")");
    return it->second;
  };
  if (static_cast<uint64_t>(get("fingerprint").item<int64_t>()) != fingerprint)
    throw std::invalid_argument("--resume: " + path.string() +
                                " was written by a run with other options (model, data, loss, "
                                "--params, --steps, --probes, --seed or --dtype differ)");
  Progress p;
  p.wall_s = get("wall_s").item<double>();
  auto read = [&](const std::string& prefix) {
    LanczosState s;
    s.alpha = to_doubles(get(prefix + "alpha"));
    s.beta = to_doubles(get(prefix + "beta"));
    s.invariant = get(prefix + "invariant").item<int64_t>() != 0;
    return s;
  };
  const auto done = get("probes_done").item<int64_t>();
  for (int64_t i = 0; i < done; ++i) p.done.push_back(read("done/" + std::to_string(i) + "/"));
  if (t.count("current/basis")) {
    p.current = read("current/");
    p.current.basis = t.at("current/basis");
  }
  return p;
}

std::string extremes(const LanczosState& s) {
  const auto e = tridiagonal_eigen(s.alpha, s.beta);
  std::ostringstream o;
  o << "Ritz [" << e.nodes.front() << ", " << e.nodes.back() << "]";
  return o.str();
}

// Lanczos on the diagonal block of H for the flat ranges `ranges` ([begin, length) pairs).
std::string csv_number(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

}  // namespace

std::vector<std::string> HessianRunConfig::problems() const {
  std::vector<std::string> p;
  if (steps < 1) p.push_back("--steps must be at least 1, got " + std::to_string(steps));
  if (probes < 1) p.push_back("--probes must be at least 1, got " + std::to_string(probes));
  if (top_k < 1) p.push_back("--top-k must be at least 1, got " + std::to_string(top_k));
  if (trace_samples < 0) p.push_back("--trace-samples must be >= 0, got " + std::to_string(trace_samples));
  if (density.bins < 2) p.push_back("--bins must be at least 2, got " + std::to_string(density.bins));
  if (!(density.sigma_squared > 0)) p.push_back("--sigma must be positive, got " + csv_number(density.sigma_squared));
  if (power_iterations < 1) p.push_back("--power-iters must be at least 1");
  if (!(power_tol > 0)) p.push_back("--power-tol must be positive");
  if (per_block_steps < 1) p.push_back("--per-block-steps must be at least 1");
  if (save_every < 0) p.push_back("--save-every must be >= 0, got " + std::to_string(save_every));
  if (out.empty()) p.push_back("--out is required");
  return p;
}

namespace {

// The spectral density of the probes' quadratures into OUT/density.csv; returns its variance.
double write_density(const std::vector<Quadrature>& quadratures, const HessianRunConfig& c) {
  const auto density = spectral_density(quadratures, c.density);
  std::string csv = "lambda,density\n";
  for (size_t i = 0; i < density.grid.size(); ++i)
    csv += csv_number(density.grid[i]) + "," + csv_number(density.density[i]) + "\n";
  if (c.writes) core::write_file_atomic((fs::path(c.out) / "density.csv").string(), csv);
  return density.variance;
}

// --per-block: each parameter block's extreme eigenvalues into OUT/per_block.csv; returns the HVPs made.
int64_t write_per_block(const FullDataHessian& h, const HessianRunConfig& c, std::ostream& say) {
  int64_t hvps = 0;
  std::string table = "block,params,lambda_max,lambda_min\n";
  const LinearOperator hvp = [&](const torch::Tensor& v) { return h.hvp(v); };
  for (const auto& block : parameter_blocks(h, parameter_block)) {
    const auto e = block_spectrum(hvp, h.dim(), block, c.per_block_steps, c.seed, h.dtype());
    say << "normlab hessian: block " << block.name << " (" << block.size << " parameters) lambda_max "
        << e.nodes.back() << "\n";
    table += block.name + "," + std::to_string(block.size) + "," + csv_number(e.nodes.back()) + "," +
             csv_number(e.nodes.front()) + "\n";
    hvps += std::min(c.per_block_steps, block.size);
  }
  if (c.writes) core::write_file_atomic((fs::path(c.out) / "per_block.csv").string(), table);
  return hvps;
}

// hessian.json's "config": the model's resolved options and this run's.
nlohmann::json run_config(const nlohmann::json& resolved, const HessianRunConfig& c) {
  auto j = resolved;
  j["steps"] = c.steps;
  j["probes"] = c.probes;
  j["top_k"] = c.top_k;
  j["trace_samples"] = c.trace_samples;
  j["bins"] = c.density.bins;
  j["sigma"] = c.density.sigma_squared;
  j["power"] = c.power;
  j["power_iters"] = c.power_iterations;
  j["power_tol"] = c.power_tol;
  j["per_block"] = c.per_block;
  j["per_block_steps"] = c.per_block_steps;
  j["seed"] = c.seed;
  j["save_every"] = c.save_every;
  return j;
}

}  // namespace

nlohmann::json run_hessian(const FullDataHessian& h, const HessianRunConfig& c,
                           const nlohmann::json& resolved) {
  const auto t0 = Clock::now();
  const fs::path out(c.out), state_path = out / kStateFile;
  // Rank 0 of a job writes OUT and tells the progress; the other ranks compute alike, silently.
  std::ostream nowhere(nullptr);
  std::ostream& say = c.writes ? std::cerr : nowhere;
  if (c.writes) fs::create_directories(out);
  const int64_t n = h.dim();
  const auto dtype = h.dtype();
  nlohmann::json fp = {{"resolved", resolved}, {"steps", c.steps}, {"probes", c.probes}, {"seed", c.seed}};
  const auto fp_text = fp.dump();
  const uint64_t fingerprint = core::hash_bytes(fp_text.data(), fp_text.size());

  int64_t hvps = 0;
  const LinearOperator op = [&](const torch::Tensor& v) {
    ++hvps;
    return h.hvp(v);
  };
  Progress p;
  if (c.resume && fs::exists(state_path)) {
    p = load_state(state_path, fingerprint);
    say << "normlab hessian: resuming from " << state_path.string() << " (" << p.done.size()
              << " probes done, " << p.current.alpha.size() << " steps of the next)\n";
  } else if (c.resume) {
    say << "normlab hessian: --resume: no " << state_path.string() << " yet, starting afresh\n";
  }
  say << "normlab hessian: " << n << " parameters, " << h.sentences() << " sentences, "
            << h.tokens() << " target tokens\n";

  // Lanczos probes: Rademacher vector seed + p.
  auto last_line = Clock::now();
  for (int64_t probe = static_cast<int64_t>(p.done.size()); probe < c.probes; ++probe) {
    if (!p.current.basis.defined()) p.current = lanczos_start(rademacher(n, c.seed + probe, dtype));
    lanczos_continue(op, c.steps, p.current, [&](const LanczosState& s) {
      const bool last = s.invariant || s.steps() == std::min(c.steps, n);
      if (last || seconds_since(last_line) > 5.0) {
        say << "normlab hessian: probe " << probe + 1 << "/" << c.probes << " step " << s.steps()
                  << "/" << c.steps << "  " << extremes(s) << "  " << seconds_since(t0) << " s\n";
        last_line = Clock::now();
      }
      if (c.writes && c.save_every > 0 && s.steps() % c.save_every == 0 && !last)
        save_state(state_path, fingerprint, p, s, p.wall_s + seconds_since(t0));
    });
    p.done.push_back({p.current.alpha, p.current.beta, {}, p.current.invariant});
    p.current = LanczosState{};
    if (c.writes && c.save_every > 0) save_state(state_path, fingerprint, p, p.current, p.wall_s + seconds_since(t0));
  }

  nlohmann::json result;
  std::vector<Quadrature> quadratures;
  std::vector<double> trace_samples;
  double lambda_max = -INFINITY, lambda_min = INFINITY;
  std::vector<double> top;
  auto& probes_json = result["probes"] = nlohmann::json::array();
  for (const auto& s : p.done) {
    const auto e = tridiagonal_eigen(s.alpha, s.beta);
    quadratures.push_back({e.nodes, e.weights});
    trace_samples.push_back(static_cast<double>(n) * s.alpha.front());  // z^T H z, ||z||^2 = n
    if (e.nodes.back() > lambda_max) {
      lambda_max = e.nodes.back();
      top.assign(e.nodes.rbegin(), e.nodes.rbegin() + std::min<int64_t>(c.top_k, e.nodes.size()));
    }
    lambda_min = std::min(lambda_min, e.nodes.front());
    const std::vector<double> off(s.beta.begin(), s.beta.begin() + (s.steps() - 1));
    probes_json.push_back({{"alpha", s.alpha}, {"beta", off}, {"residual", s.beta.back()},
                           {"invariant", s.invariant}, {"nodes", e.nodes}, {"weights", e.weights}});
  }
  if (c.trace_samples > 0) {
    say << "normlab hessian: " << c.trace_samples << " Hutchinson samples\n";
    auto more = hutchinson_samples(op, n, dtype, c.seed + c.probes, c.trace_samples);
    trace_samples.insert(trace_samples.end(), more.begin(), more.end());
  }
  const auto trace = summarize_trace(trace_samples);
  result["lambda_max"] = lambda_max;
  result["lambda_min"] = lambda_min;
  result["top_eigenvalues"] = top;
  result["trace"] = trace.trace;
  result["trace_stderr"] = trace.standard_error;  // NaN -> null with one sample
  result["trace_samples"] = trace.samples;
  if (c.power) {
    say << "normlab hessian: power iteration\n";
    const auto pw = power_iteration(op, n, dtype, c.seed, c.power_iterations, c.power_tol);
    result["power"] = {{"eigenvalue", pw.eigenvalue}, {"iterations", pw.iterations}, {"converged", pw.converged}};
  }

  result["density_variance"] = write_density(quadratures, c);
  if (c.per_block) hvps += write_per_block(h, c, say);

  result["parameters"] = n;
  result["sentences"] = h.sentences();
  result["tokens"] = h.tokens();
  result["hvps_this_run"] = hvps;
  result["wall_s"] = p.wall_s + seconds_since(t0);
  result["config"] = run_config(resolved, c);
  if (c.writes) core::write_file_atomic((out / "hessian.json").string(), result.dump(2) + "\n");
  say << "normlab hessian: lambda_max " << lambda_max << "  lambda_min " << lambda_min
            << "  trace " << trace.trace << " +- " << trace.standard_error << "  (" << result["wall_s"]
            << " s) -> " << out.string() << "\n";
  return result;
}

}  // namespace normlab::analysis
