#include "analysis/coord_check.h"

#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <torch/torch.h>

#include "analysis/sites.h"
#include "core/file_io.h"
#include "core/tokens.h"
#include "data/batch.h"
#include "model/model.h"
#include "report/plots.h"
#include "train/criterion.h"
#include "train/width_lr.h"

namespace normlab::analysis {
namespace {

// The model of width w under parametrisation p: F scaled with C, dropout off (mup's coord check
// measures the function, not the noise).
model::ModelConfig width_config(const CoordCheckConfig& c, model::Parametrisation p, int64_t w) {
  auto m = c.model;
  m.ffn_dim = c.model.ffn_dim * w / c.model.d_model;
  m.d_model = w;
  m.dropout = m.attention_dropout = m.activation_dropout = 0.0;
  m.parametrisation = p;
  m.mup_base_width = p == model::Parametrisation::kMup ? (c.base_width > 0 ? c.base_width : c.widths.front()) : 0;
  return m;
}

// `sentences` random sentences of `length` ids in the kind's form: pairs (encoder-decoder; a
// decoder-only model reads their target side), or an encoder's inputs that predict themselves.
data::Batch random_batch(const CoordCheckConfig& c, const model::ModelConfig& m) {
  torch::manual_seed(c.seed);
  const bool encoder_only = m.kind == model::kEncoderOnly;
  const int64_t top = encoder_only ? m.src_vocab_size - 1 : m.src_vocab_size;  // not <mask>
  auto draw = [&](int64_t vocab) {
    std::vector<data::Sentence> rows(static_cast<size_t>(c.sentences));
    for (auto& row : rows) {
      auto ids = torch::randint(kNumSpecialTokens, vocab, {c.length}, torch::kInt64);
      row.assign(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + c.length);
    }
    return rows;
  };
  const auto src = draw(top), tgt = encoder_only ? src : draw(m.tgt_vocab_size);
  return encoder_only ? data::masked_batch(src, tgt, 0, src.size()) : data::make_batch(src, tgt, 0, src.size());
}

using Sums = std::map<std::string, double>;  // site -> l1

// Observers that put each block's branch and output l1 into `sums` (cleared by the caller).
void observe(model::Model net, Sums& sums) {
  for (const auto& site : block_sites(net)) {
    const std::string key = site.stack + "." + std::to_string(site.layer) + "." + site.name + ".";
    site.block->set_observer([&sums, key](const char* what, const torch::Tensor& x) {
      const std::string w = what;
      if (w == "branch" || w == "output") sums[key + w] = x.detach().abs().mean().item<double>();
    });
  }
}

// One model's l1 at each of the config's steps, added into `total[step - 1]`.
void run_model(const CoordCheckConfig& c, const model::ModelConfig& m, uint64_t seed, const data::Batch& batch,
               std::vector<Sums>& total) {
  auto net = model::create_model(m);
  model::initialize(net, seed);
  net->train();
  train::NamedTensors named;
  for (const auto& p : net->named_parameters()) named.emplace_back(p.key(), p.value());
  train::OptimizerConfig oc;
  oc.kind = c.optimizer;
  train::Optimizer optimizer(named, oc);
  optimizer.set_lr_scales(train::width_lr_scales(m, oc, named));
  Sums step;
  observe(net, step);
  for (int64_t t = 0; t < c.steps; ++t) {
    step.clear();
    optimizer.zero_grad();
    const auto result = train::loss(net, batch, train::LossOptions{});
    step["logits"] = result.logits.detach().abs().mean().item<double>();
    for (const auto& [site, v] : step) total[static_cast<size_t>(t)][site] += v;
    if (t + 1 == c.steps) break;
    (result.sums.loss / static_cast<double>(result.sums.tokens)).backward();
    optimizer.step(c.lr);
  }
  clear_observers(net);
}

}  // namespace

std::vector<std::string> CoordCheckConfig::problems() const {
  std::vector<std::string> out;
  if (widths.size() < 2) out.push_back("--widths needs at least two widths");
  for (size_t i = 0; i < widths.size(); ++i) {
    const auto w = widths[i];
    if (w <= 0 || (i > 0 && w <= widths[i - 1])) out.push_back("--widths must be positive and ascending");
    if (w > 0 && (model.ffn_dim * w) % model.d_model != 0)
      out.push_back("--widths: width " + std::to_string(w) + " gives the FFN dimension --ffn-dim x w / --d-model = " +
                    std::to_string(model.ffn_dim) + " x " + std::to_string(w) + " / " + std::to_string(model.d_model) +
                    ", not whole");
  }
  if (steps < 2) out.push_back("--steps must be at least 2 (one update), got " + std::to_string(steps));
  if (seeds < 1) out.push_back("--seeds must be at least 1, got " + std::to_string(seeds));
  if (!(lr > 0.0)) out.push_back("--lr must be positive");
  if (sentences < 1 || length < 1) out.push_back("--sentences and --length must be positive");
  if (optimizer != train::OptimizerKind::kAdam && optimizer != train::OptimizerKind::kAdamW &&
      optimizer != train::OptimizerKind::kSgd)
    out.push_back("--optimizer: the coordinate check uses mup's optimisers: adam|adamw|sgd, got " +
                  train::to_string(optimizer));
  if (model.classifier()) out.push_back("--num-classes: the coordinate check trains a language model's head");
  if (parametrisations.empty()) out.push_back("--parametrisations needs at least one of sp|mup|u-mup");
  if (out.empty())  // each width's models, as they will be built
    for (auto p : parametrisations) {
      train::OptimizerConfig oc;
      oc.kind = optimizer;
      for (auto& q : train::width_optimizer_problems(width_config(*this, p, widths.front()), oc)) out.push_back(q);
      for (auto w : widths)
        for (auto& q : width_config(*this, p, w).problems()) out.push_back("width " + std::to_string(w) + ": " + q);
    }
  return out;
}

std::vector<CoordRecord> coord_check(const CoordCheckConfig& c) {
  std::vector<CoordRecord> out;
  for (auto p : c.parametrisations) {
    for (auto w : c.widths) {
      const auto m = width_config(c, p, w);
      const auto batch = random_batch(c, m);
      std::vector<Sums> total(static_cast<size_t>(c.steps));
      for (int64_t s = 0; s < c.seeds; ++s) run_model(c, m, c.seed + static_cast<uint64_t>(s), batch, total);
      for (int64_t t = 0; t < c.steps; ++t)
        for (const auto& [site, sum] : total[static_cast<size_t>(t)])
          out.push_back({model::to_string(p), w, t + 1, site, sum / static_cast<double>(c.seeds)});
      std::cerr << "normlab coord-check: " << model::to_string(p) << " width " << w << " done\n";
    }
  }
  return out;
}

std::vector<CoordSlope> coord_slopes(const std::vector<CoordRecord>& records) {
  std::map<std::tuple<std::string, std::string, int64_t>, std::vector<std::pair<double, double>>> points;
  for (const auto& r : records)
    points[{r.parametrisation, r.site, r.step}].emplace_back(std::log(static_cast<double>(r.width)), std::log(r.l1));
  std::vector<CoordSlope> out;
  for (const auto& [key, xy] : points) {
    double mx = 0, my = 0;
    for (const auto& [x, y] : xy) mx += x, my += y;
    mx /= static_cast<double>(xy.size());
    my /= static_cast<double>(xy.size());
    double sxy = 0, sxx = 0;
    for (const auto& [x, y] : xy) sxy += (x - mx) * (y - my), sxx += (x - mx) * (x - mx);
    out.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), sxx > 0 ? sxy / sxx : 0.0});
  }
  return out;
}

namespace {

void draw_figures(const std::vector<CoordRecord>& records, const std::string& out) {
  int64_t last = 0;
  std::set<std::string> parametrisations;
  for (const auto& r : records) {
    last = std::max(last, r.step);
    parametrisations.insert(r.parametrisation);
  }
  for (const auto& p : parametrisations) {
    std::map<std::string, report::Series> series;
    for (const auto& r : records)
      if (r.parametrisation == p && r.step == last) {
        series[r.site].title = r.site;
        series[r.site].points.emplace_back(static_cast<double>(r.width), r.l1);
      }
    report::LineFigure f;
    f.name = "coord_check_" + p;
    f.title = p + ": mean |x| after " + std::to_string(last - 1) + " updates";
    f.xlabel = "width (d_model)";
    f.ylabel = "l1 = mean |x|";
    f.logx = f.logy = true;
    for (auto& [site, s] : series) f.series.push_back(std::move(s));
    report::draw(f, out);
  }
}

}  // namespace

void write_coord_check(const std::vector<CoordRecord>& records, const std::string& out) {
  std::filesystem::create_directories(out);
  std::ostringstream csv, slopes;
  csv << "parametrisation,width,step,site,l1\n";
  for (const auto& r : records)
    csv << r.parametrisation << "," << r.width << "," << r.step << "," << r.site << "," << csv_number(r.l1) << "\n";
  slopes << "parametrisation,site,step,slope\n";
  for (const auto& s : coord_slopes(records))
    slopes << s.parametrisation << "," << s.site << "," << s.step << "," << csv_number(s.slope) << "\n";
  core::write_file_atomic((std::filesystem::path(out) / "coord_check.csv").string(), csv.str());
  core::write_file_atomic((std::filesystem::path(out) / "coord_slopes.csv").string(), slopes.str());
  draw_figures(records, out);
}

}  // namespace normlab::analysis
