#include "report/report.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "recipe/recipe.h"
#include "recipe/results.h"
#include "report/claims.h"
#include "report/plots.h"

namespace normlab::report {
namespace {

namespace fs = std::filesystem;
using recipe::CellResult;
using recipe::CsvTable;

// The result files a folder may hold; a folder with none of them is not a result folder.
const char* const kResultFiles[] = {"metrics.jsonl", "grad_norms.csv", "hidden_norms.csv", "sweep.csv",
                                    "trace/histograms.csv", "trace/ln_inputs.csv", "perturb.csv", "density.csv",
                                    "per_block.csv", "evaluate.json", "curvature.jsonl", "warmup.jsonl"};

// One folder given to the report: a recipe run (run.json + cells/) or a single result folder.
struct Source {
  std::string dir, prefix;  // prefix: distinguishes figure names when several folders are given
  std::string title, description, paper, scale, recipe_path;
  std::vector<CellResult> cells;
  std::vector<recipe::Claim> claims;
};

struct FigureRef {
  std::string kind, name, caption;  // name: file stem under figures/
};

double to_double(const std::string& s) {
  if (s.empty()) return std::nan("");
  char* end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  return end && *end == '\0' ? x : std::nan("");
}

std::string show(double x, int digits = 4) {
  if (std::isnan(x)) return "-";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", digits, x);
  return buf;
}

nlohmann::json read_json(const std::string& path) {
  const auto bytes = core::read_file(path);
  try {
    return nlohmann::json::parse(bytes.begin(), bytes.end());
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": not valid JSON: " + e.what());
  }
}

// A number under `key` of a JSON object, NaN when absent or not a number.
double number_at(const nlohmann::json& j, const std::string& key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : std::nan("");
}

// Named constructors (aggregate initialisation would leave fields to -Wextra's warnings).
LineFigure line_figure(const std::string& name, const std::string& title, const std::string& xlabel,
                       const std::string& ylabel, bool logy = false) {
  LineFigure f;
  f.name = name;
  f.title = title;
  f.xlabel = xlabel;
  f.ylabel = ylabel;
  f.logy = logy;
  return f;
}

Series series(const std::string& title, bool dashed = false) {
  Series s;
  s.title = title;
  s.dashed = dashed;
  return s;
}

Source load_source(const std::string& dir) {
  Source s;
  s.dir = fs::absolute(dir).lexically_normal().string();
  if (fs::exists(s.dir + "/run.json")) {
    const auto bytes = core::read_file(s.dir + "/run.json");
    const auto run = nlohmann::json::parse(bytes.begin(), bytes.end());
    s.title = run.at("title").get<std::string>();
    s.scale = run.at("scale").get<std::string>();
    s.recipe_path = run.at("recipe").get<std::string>();
    const auto r = recipe::load_recipe(s.dir + "/recipe.toml", recipe::parse_scale(s.scale));
    s.description = r.description;
    s.paper = r.paper;
    s.claims = r.claims;
    for (const auto& c : run.at("cells")) s.cells.push_back(recipe::read_cell(s.dir + "/cells", c.at("name")));
    return s;
  }
  bool any = false;
  for (const char* f : kResultFiles) any = any || fs::exists(s.dir + "/" + f);
  if (!any)
    throw std::invalid_argument(dir + ": neither a `normlab run` folder (run.json) nor a result folder "
                                "(metrics.jsonl, grad_norms.csv, sweep.csv, perturb.csv, density.csv, per_block.csv, "
                                "evaluate.json, trace/...)");
  CellResult c;
  c.name = fs::path(s.dir).filename().string();
  c.dir = s.dir;
  c.status = "ok";
  for (const auto& r : recipe::read_metrics(s.dir + "/metrics.jsonl"))
    if (r.diverged) c.status = "diverged";
  s.title = "results in " + s.dir;
  s.cells.push_back(c);
  return s;
}

bool has(const CellResult& c, const std::string& file) {
  return c.status != "not run" && fs::exists(c.dir + "/" + file);
}

// ---- training curves (metrics.jsonl) ----
void training_figures(const Source& s, const std::string& fig_dir, std::vector<FigureRef>& out) {
  LineFigure valid = line_figure(s.prefix + "valid-loss", s.title + ": validation loss", "epoch", "validation loss (nats/token)");
  LineFigure bleu = line_figure(s.prefix + "valid-bleu", s.title + ": validation BLEU", "epoch", "BLEU");
  LineFigure train = line_figure(s.prefix + "train-loss", s.title + ": training loss", "update", "training loss (nats/token)");
  for (const auto& c : s.cells) {
    if (!has(c, "metrics.jsonl")) continue;
    const std::string label = c.name + (c.status == "diverged" ? " (diverged)" : "");
    Series v = series(label), b = series(label), t = series(label);
    for (const auto& r : recipe::read_metrics(c.dir + "/metrics.jsonl")) {
      if (r.validation) {
        v.points.emplace_back(static_cast<double>(r.epoch), r.valid_loss);
        b.points.emplace_back(static_cast<double>(r.epoch), r.valid_bleu);
      } else if (!r.diverged) {
        t.points.emplace_back(static_cast<double>(r.step), r.loss);
      }
    }
    valid.series.push_back(v);
    bleu.series.push_back(b);
    train.series.push_back(t);
  }
  if (draw(valid, fig_dir)) out.push_back({"training", valid.name, "Validation loss against epoch, one line per cell"});
  if (draw(bleu, fig_dir)) out.push_back({"training", bleu.name, "Validation BLEU against epoch"});
  if (draw(train, fig_dir)) out.push_back({"training", train.name, "Training loss against update (logged records)"});
}

// Rows grouped by the values of `keys`, in first-appearance order.
std::vector<std::pair<std::string, std::vector<const std::vector<std::string>*>>> group(
    const CsvTable& t, const std::vector<std::string>& keys, const std::string& path) {
  std::vector<int> cols;
  for (const auto& k : keys) {
    cols.push_back(t.column(k));
    if (cols.back() < 0) throw std::runtime_error(path + ": no column '" + k + "'");
  }
  std::vector<std::pair<std::string, std::vector<const std::vector<std::string>*>>> groups;
  for (const auto& row : t.rows) {
    std::string label;
    for (size_t i = 0; i < cols.size(); ++i) label += (i ? " " : "") + row[cols[i]];
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == label; });
    if (it == groups.end()) groups.push_back({label, {}}), it = groups.end() - 1;
    it->second.push_back(&row);
  }
  return groups;
}

double field(const CsvTable& t, const std::vector<std::string>& row, const std::string& column, const std::string& path) {
  const int c = t.column(column);
  if (c < 0) throw std::runtime_error(path + ": no column '" + column + "'");
  return to_double(row[c]);
}

// ---- probe: gradient norms and hidden-state norms against layer ----
void probe_figures(const Source& s, const std::string& fig_dir, std::vector<FigureRef>& out, std::string& tables) {
  for (const auto& c : s.cells) {
    if (has(c, "grad_norms.csv")) {
      const std::string path = c.dir + "/grad_norms.csv";
      const auto t = recipe::read_csv(path);
      LineFigure f = line_figure(s.prefix + "grad-norms-" + c.name, c.name + ": gradient norm at initialisation", "layer",
                   "expected gradient norm", true);
      tables += "\n| " + c.name + ": scheme stack | layers | first layer | last layer | last/first |\n|---|---|---|---|---|\n";
      const int param = t.column("param");
      for (const auto& [label, rows] : group(t, {"scheme", "stack"}, path)) {
        // Xiong Fig. 3 shows W^{2,L} (the FFN's second weight, fc2.weight); other layers'
        // parameters are summed in quadrature when a stack has none.
        auto is_fc2 = [&](const std::vector<std::string>& r) {
          const std::string suffix = "fc2.weight";
          return param >= 0 && r[param].size() >= suffix.size() &&
                 r[param].compare(r[param].size() - suffix.size(), suffix.size(), suffix) == 0;
        };
        bool fc2 = false;
        for (const auto* r : rows) fc2 = fc2 || is_fc2(*r);
        std::map<double, double> by_layer;
        for (const auto* r : rows) {
          const double layer = field(t, *r, "layer", path);
          if (layer < 0) continue;
          if (fc2 && !is_fc2(*r)) continue;
          const double g = field(t, *r, "expected_grad_norm_mean", path);
          by_layer[layer] += g * g;
        }
        if (by_layer.empty()) continue;
        Series line = series(label + (fc2 ? " fc2.weight" : " all parameters"));
        for (const auto& [layer, sq] : by_layer) line.points.emplace_back(layer, std::sqrt(sq));
        const double first = line.points.front().second, last = line.points.back().second;
        tables += "| " + label + " | " + std::to_string(by_layer.size()) + " | " + show(first) + " | " + show(last) +
                  " | " + show(last / first) + " |\n";
        f.series.push_back(line);
      }
      if (draw(f, fig_dir))
        out.push_back({"probe", f.name, "Gradient norm against layer (" + c.name + ", grad_norms.csv)"});
    }
    if (has(c, "hidden_norms.csv")) {
      const std::string path = c.dir + "/hidden_norms.csv";
      const auto t = recipe::read_csv(path);
      LineFigure f = line_figure(s.prefix + "hidden-norms-" + c.name, c.name + ": hidden-state norms and Lemma 2", "layer",
                   "norm", true);
      for (const auto& [label, rows] : group(t, {"scheme", "stack", "quantity"}, path)) {
        Series v = series(label), lo = series(label + " Lemma 2 lower", true),
               hi = series(label + " Lemma 2 upper", true), lemma = series(label + " Lemma 2", true);
        for (const auto* r : rows) {
          const double layer = field(t, *r, "layer", path);
          v.points.emplace_back(layer, field(t, *r, "value_mean", path));
          lemma.points.emplace_back(layer, field(t, *r, "lemma_value", path));
          lo.points.emplace_back(layer, field(t, *r, "lemma_lower", path));
          hi.points.emplace_back(layer, field(t, *r, "lemma_upper", path));
        }
        f.series.insert(f.series.end(), {v, lemma, lo, hi});
      }
      if (draw(f, fig_dir))
        out.push_back({"probe", f.name, "Hidden-state norm against layer, dashed: Lemma 2's value and bounds (" +
                                            c.name + ", hidden_norms.csv)"});
    }
  }
}

// ---- probe --sweep: Theorem 1, last FFN weight's gradient against depth and width ----
void sweep_figures(const Source& s, const std::string& fig_dir, std::vector<FigureRef>& out, std::string& tables) {
  for (const auto& c : s.cells) {
    if (!has(c, "sweep.csv") || !has(c, "sweep.json")) continue;
    const std::string path = c.dir + "/sweep.csv";
    const auto t = recipe::read_csv(path);
    const auto slopes = read_json(c.dir + "/sweep.json");
    LineFigure by_l = line_figure(s.prefix + "sweep-layers-" + c.name, c.name + ": last FFN weight's gradient against depth",
                                  "layers L", "||dL/dW2,L||_F (mean over seeds)", true);
    LineFigure by_d = line_figure(s.prefix + "sweep-d-" + c.name, c.name + ": last FFN weight's gradient against width",
                                  "d_model C", "||dL/dW2,L||_F (mean over seeds)", true);
    by_l.logx = by_d.logx = true;
    tables += "\n| " + c.name + ": scheme | slope vs L | Theorem 1 | slope vs C | Theorem 1 (C sqrt(ln C)) |\n"
              "|---|---|---|---|---|\n";
    for (const auto& [scheme, rows] : group(t, {"scheme"}, path)) {
      const auto& j = slopes.contains(scheme) ? slopes[scheme] : nlohmann::json();
      const double d0 = number_at(j, "d_model_of_layer_sweep"), l0 = number_at(j, "layers_of_d_sweep");
      // Mean over seeds of each point of the two sweeps (sweep.json says which width and depth they hold fixed).
      std::map<double, std::pair<double, int>> at_l, at_d;
      for (const auto* r : rows) {
        const double layers = field(t, *r, "layers", path), d = field(t, *r, "d_model", path);
        const double g = field(t, *r, "grad_norm", path);
        if (d == d0) at_l[layers].first += g, at_l[layers].second += 1;
        if (layers == l0) at_d[d].first += g, at_d[d].second += 1;
      }
      // Theorem 1's slope drawn dashed through the centre (in log-log) of the measured points.
      auto add = [&](LineFigure& f, const std::map<double, std::pair<double, int>>& points, double fitted,
                     double theory) {
        Series m = series(scheme + " (fitted slope " + show(fitted, 3) + ")"), ref = series(scheme + " Theorem 1 slope " + show(theory, 3), true);
        double lx = 0, ly = 0;
        for (const auto& [x, v] : points) {
          m.points.emplace_back(x, v.first / v.second);
          lx += std::log(x) / static_cast<double>(points.size());
          ly += std::log(v.first / v.second) / static_cast<double>(points.size());
        }
        for (const auto& [x, v] : points) ref.points.emplace_back(x, std::exp(ly + theory * (std::log(x) - lx)));
        f.series.push_back(m);
        if (points.size() > 1) f.series.push_back(ref);
      };
      add(by_l, at_l, number_at(j, "slope_layers"), number_at(j, "theory_slope_layers"));
      add(by_d, at_d, number_at(j, "slope_d"), number_at(j, "theory_slope_d"));
      tables += "| " + scheme + " | " + show(number_at(j, "slope_layers"), 3) + " | " +
                show(number_at(j, "theory_slope_layers"), 3) + " | " + show(number_at(j, "slope_d"), 3) + " | " +
                show(number_at(j, "theory_slope_d"), 3) + " |\n";
    }
    if (draw(by_l, fig_dir))
      out.push_back({"probe", by_l.name, "Theorem 1: gradient norm of the last FFN weight against depth, log-log, "
                                         "Theorem 1's slope dashed (" + c.name + ", sweep.csv)"});
    if (draw(by_d, fig_dir))
      out.push_back({"probe", by_d.name, "Theorem 1: gradient norm of the last FFN weight against width, log-log, "
                                         "Theorem 1's slope dashed (" + c.name + ", sweep.csv)"});
  }
}

// ---- evaluate --out: test-set BLEU, chrF and loss ----
void evaluate_table(const Source& s, std::string& tables) {
  std::string rows;
  for (const auto& c : s.cells) {
    if (!has(c, "evaluate.json")) continue;
    const auto j = read_json(c.dir + "/evaluate.json");
    rows += "| " + c.name + " | " + show(number_at(j, "sentences"), 8) + " | " + show(number_at(j, "bleu")) + " | " +
            show(number_at(j, "chrf")) + " | " + show(number_at(j, "loss")) + " |\n";
  }
  if (!rows.empty()) tables += "\n| cell | sentences | BLEU | chrF | loss |\n|---|---|---|---|---|\n" + rows;
}

// ---- trace: histograms over steps, LayerNorm input norms over steps ----
void trace_figures(const Source& s, const std::string& fig_dir, std::vector<FigureRef>& out) {
  for (const auto& c : s.cells) {
    if (has(c, "trace/histograms.csv")) {
      const std::string path = c.dir + "/trace/histograms.csv";
      const auto t = recipe::read_csv(path);
      for (const auto& [kind, rows] : group(t, {"kind"}, path)) {
        // Counts summed over parameters; the zero bin (bin_lo = bin_hi = -inf) is not drawn.
        std::map<double, std::map<double, double>> counts;  // step -> bin centre -> count
        std::set<double> bins;
        for (const auto* r : rows) {
          const double lo = field(t, *r, "bin_lo", path), hi = field(t, *r, "bin_hi", path);
          if (!std::isfinite(lo) || !std::isfinite(hi)) continue;
          const double centre = 0.5 * (lo + hi);
          counts[field(t, *r, "step", path)][centre] += field(t, *r, "count", path);
          bins.insert(centre);
        }
        HeatMap m;
        m.name = s.prefix + "histogram-" + kind + "-" + c.name;
        m.title = c.name + ": " + kind + " histogram over steps";
        m.xlabel = "step";
        m.ylabel = "log10 |value| (bin centre)";
        m.cblabel = "count";
        m.ys.assign(bins.begin(), bins.end());
        for (const auto& [step, by_bin] : counts) {
          m.xs.push_back(step);
          std::vector<double> column;
          for (double b : m.ys) column.push_back(by_bin.count(b) ? by_bin.at(b) : 0.0);
          m.value.push_back(column);
        }
        if (draw(m, fig_dir))
          out.push_back({"trace", m.name, "Histogram of " + kind + " values over steps, all parameters (" + c.name +
                                              ", trace/histograms.csv)"});
      }
    }
    if (has(c, "trace/ln_inputs.csv")) {
      const std::string path = c.dir + "/trace/ln_inputs.csv";
      const auto t = recipe::read_csv(path);
      for (const auto& [stack, rows] : group(t, {"stack"}, path)) {
        LineFigure f = line_figure(s.prefix + "ln-inputs-" + stack + "-" + c.name, c.name + ": " + stack + " LayerNorm input norms",
                     "step", "mean input norm", true);
        CsvTable sub;
        sub.columns = t.columns;
        for (const auto* r : rows) sub.rows.push_back(*r);
        for (const auto& [label, lrows] : group(sub, {"layer", "ln"}, path)) {
          Series line = series("layer " + label);
          for (const auto* r : lrows)
            line.points.emplace_back(field(t, *r, "step", path), field(t, *r, "mean_input_norm", path));
          f.series.push_back(line);
        }
        if (draw(f, fig_dir))
          out.push_back({"trace", f.name, "LayerNorm input norms per layer over steps, " + stack + " (" + c.name +
                                              ", trace/ln_inputs.csv)"});
      }
    }
  }
}

// ---- curvature: sharpness and its stability threshold over updates (docs/curvature.md) ----
void curvature_figures(const Source& s, const std::string& fig_dir, std::vector<FigureRef>& out) {
  for (const auto& c : s.cells) {
    if (!has(c, "curvature.jsonl")) continue;
    const std::string path = c.dir + "/curvature.jsonl";
    const auto t = recipe::read_table(path);
    LineFigure f = line_figure(s.prefix + "curvature-" + c.name, c.name + ": sharpness against the stability threshold",
                               "update", "eigenvalue", /*logy=*/true);
    const int step = t.column("step");
    // Each quantity beside the threshold that applies to it (dashed); thresholds at lr 0 are null.
    for (const auto& [column, title, dashed] :
         {std::make_tuple("preconditioned_lambda_max", "lambda_1(P^-1 H)", false),
          std::make_tuple("adam_threshold", "Adam threshold (2+2b1)/((1-b1) lr)", true),
          std::make_tuple("lambda_max", "lambda_1(H)", false), std::make_tuple("sgd_threshold", "2/lr", true)}) {
      const int col = t.column(column);
      if (col < 0 || step < 0) continue;
      Series line = series(title, dashed);
      for (const auto& row : t.rows) {
        const double x = to_double(row[step]), y = to_double(row[col]);
        if (std::isfinite(x) && std::isfinite(y) && y > 0) line.points.emplace_back(x, y);
      }
      if (!line.points.empty()) f.series.push_back(line);
    }
    if (!f.series.empty() && draw(f, fig_dir))
      out.push_back({"curvature", f.name, "Sharpness and Adam's preconditioned sharpness against their stability "
                                          "thresholds over updates (" + c.name + ", curvature.jsonl)"});
  }
}

// ---- --warmup auto: the rate chosen against the update, beside the target and the rate that the
// measured sharpness says is stable, T / lambda (docs/warmup.md) ----
void warmup_figures(const Source& s, const std::string& fig_dir, std::vector<FigureRef>& out) {
  for (const auto& c : s.cells) {
    if (!has(c, "warmup.jsonl")) continue;
    const auto t = recipe::read_table(c.dir + "/warmup.jsonl");
    LineFigure f = line_figure(s.prefix + "warmup-" + c.name, c.name + ": the rate --warmup auto chose", "update",
                               "learning rate", /*logy=*/true);
    const int step = t.column("step"), lr = t.column("lr"), target = t.column("target_lr"),
              stable = t.column("stable_factor");
    if (step < 0 || lr < 0 || target < 0) continue;
    Series chosen = series("lr of the next update"), goal = series("target lr", true),
           limit = series("stable at the measured sharpness, T / lambda", true);
    for (const auto& row : t.rows) {
      const double x = to_double(row[step]), y = to_double(row[lr]), g = to_double(row[target]);
      if (std::isfinite(x) && y > 0) chosen.points.emplace_back(x, y);
      if (std::isfinite(x) && g > 0) goal.points.emplace_back(x, g);
      const double st = stable < 0 ? NAN : to_double(row[stable]);
      if (std::isfinite(x) && st > 0 && g > 0) limit.points.emplace_back(x, st * g);
    }
    for (auto* line : {&chosen, &goal, &limit})
      if (!line->points.empty()) f.series.push_back(*line);
    if (!f.series.empty() && draw(f, fig_dir))
      out.push_back({"warmup", f.name, "The rate --warmup auto chose at each decision, its target, and the rate "
                                       "stable at the measured preconditioned sharpness (" + c.name + ", warmup.jsonl)"});
  }
}

// ---- final loss against the learning rate: cells that differ only in a grid key `lr` ----
// One figure with a line per configuration (the cell name's prefix and its other grid keys); with
// more than kLinesPerPanel lines, also one panel per prefix (lr_transfer_width's 40 lines are
// unreadable in one).
constexpr size_t kLinesPerPanel = 8;

void lr_grid_figure(const Source& s, const std::string& fig_dir, std::vector<FigureRef>& out) {
  // A configuration: its cell-name prefix and the "key=value" of its other grid keys.
  using Config = std::vector<std::string>;
  using Lines = std::map<Config, std::map<double, double>>;  // configuration -> lr -> final valid loss
  std::map<std::string, Lines> panels;                       // prefix -> its lines
  for (const auto& c : s.cells) {
    double lr = std::nan("");
    const std::string prefix = c.name.substr(0, c.name.find('_'));
    Config config{prefix};
    for (const auto& [k, v] : c.grid) {
      if (k == "lr")
        lr = to_double(v);
      else
        config.push_back(k + "=" + v);
    }
    const auto m = recipe::cell_metrics(c);
    const auto loss = m.find("final_valid_loss");
    if (std::isfinite(lr) && loss != m.end() && std::isfinite(loss->second)) panels[prefix][config][lr] = loss->second;
  }
  // A line per configuration of `groups` with at least two lrs, labelled by its parts less `common`.
  auto figure = [&](const std::string& name, const std::string& title, const std::vector<const Lines*>& groups,
                    const std::set<std::string>& common) {
    LineFigure f = line_figure(name, title, "peak learning rate", "final validation loss (nats/token)");
    f.logx = true;
    for (const auto* lines : groups)
      for (const auto& [config, points] : *lines) {
        if (points.size() < 2) continue;
        std::string label;
        for (const auto& part : config)
          if (!common.count(part)) label += (label.empty() ? "" : " ") + part;
        Series line = series(label.empty() ? config.front() : label);
        for (const auto& [lr, loss] : points) line.points.emplace_back(lr, loss);
        f.series.push_back(line);
      }
    return f;
  };
  std::vector<const Lines*> all;
  for (const auto& [prefix, lines] : panels) all.push_back(&lines);
  const auto whole = figure(s.prefix + "lr-grid", s.title + ": final validation loss against the learning rate", all, {});
  if (whole.series.empty() || !draw(whole, fig_dir)) return;
  out.push_back({"lr-grid", whole.name, "Final validation loss against the peak learning rate, one line per "
                                        "configuration (diverged runs left out; LR sensitivity: scripts/lr_sensitivity.py)"});
  if (whole.series.size() <= kLinesPerPanel || panels.size() < 2) return;
  for (const auto& [prefix, lines] : panels) {
    // The panel's title names the prefix and the grid values its lines share; the labels the rest.
    std::set<std::string> common(lines.begin()->first.begin(), lines.begin()->first.end());
    for (const auto& [config, points] : lines)
      for (auto it = common.begin(); it != common.end();)
        it = std::find(config.begin(), config.end(), *it) == config.end() ? common.erase(it) : std::next(it);
    std::string shared;
    for (const auto& part : common)
      if (part != prefix) shared += " " + part;
    const auto panel = figure(s.prefix + "lr-grid-" + prefix,
                              prefix + shared + ": final validation loss against the learning rate", {&lines}, common);
    if (!panel.series.empty() && draw(panel, fig_dir))
      out.push_back({"lr-grid", panel.name, "The same, the cells named " + prefix + "_* only"});
  }
}

// ---- --trace-logits: the largest attention logit and log Z against the update ----
void logit_figures(const Source& s, const std::string& fig_dir, std::vector<FigureRef>& out) {
  for (const auto& c : s.cells) {
    if (!has(c, "trace/attention_logits.csv") || !has(c, "trace/output_logits.csv")) continue;
    LineFigure f = line_figure(s.prefix + "logits-" + c.name, c.name + ": attention and output logits", "update",
                               "logit");
    const auto attention = recipe::read_table(c.dir + "/trace/attention_logits.csv");
    const int step = attention.column("step"), value = attention.column("max_logit");
    std::map<double, double> largest;  // update -> max over heads and attentions
    for (const auto& row : attention.rows) {
      const double x = to_double(row[step]), y = to_double(row[value]);
      if (std::isfinite(x) && std::isfinite(y)) largest[x] = std::max(largest.count(x) ? largest[x] : y, y);
    }
    Series a = series("largest |q.k|/sqrt(D), all heads");
    for (const auto& [x, y] : largest) a.points.emplace_back(x, y);
    f.series.push_back(a);
    const auto output = recipe::read_table(c.dir + "/trace/output_logits.csv");
    for (const auto& [column, title, dashed] : {std::make_tuple("max_log_z", "max log Z", false),
                                                std::make_tuple("mean_log_z", "mean log Z", true)}) {
      Series z = series(title, dashed);
      const int zs = output.column("step"), zc = output.column(column);
      for (const auto& row : output.rows) z.points.emplace_back(to_double(row[zs]), to_double(row[zc]));
      f.series.push_back(z);
    }
    if (draw(f, fig_dir))
      out.push_back({"logits", f.name, "The largest attention logit over every head, and the output's log Z, "
                                       "against the update (" + c.name + ", trace/attention_logits.csv, output_logits.csv)"});
  }
}

// ---- perturb: output change against depth ----
void perturb_figures(const Source& s, const std::string& fig_dir, std::vector<FigureRef>& out, std::string& tables) {
  for (const auto& c : s.cells) {
    if (!has(c, "perturb.csv")) continue;
    const std::string path = c.dir + "/perturb.csv";
    const auto t = recipe::read_csv(path);
    LineFigure f = line_figure(s.prefix + "perturb-" + c.name, c.name + ": output change against depth", "depth (layers)",
                 "output change (mean over seeds)", true);
    tables += "\n| " + c.name + ": scheme delta | depth | encoder change | decoder change |\n|---|---|---|---|\n";
    for (const auto& [label, rows] : group(t, {"scheme", "delta"}, path)) {
      std::map<double, std::pair<double, int>> enc, dec;  // depth -> (sum, n)
      for (const auto* r : rows) {
        const double depth = field(t, *r, "depth", path);
        enc[depth].first += field(t, *r, "encoder_change", path);
        enc[depth].second += 1;
        dec[depth].first += field(t, *r, "decoder_change", path);
        dec[depth].second += 1;
      }
      Series e = series(label + " encoder"), d = series(label + " decoder", true);
      for (const auto& [depth, v] : enc) {
        e.points.emplace_back(depth, v.first / v.second);
        d.points.emplace_back(depth, dec[depth].first / dec[depth].second);
        tables += "| " + label + " | " + show(depth) + " | " + show(v.first / v.second) + " | " +
                  show(dec[depth].first / dec[depth].second) + " |\n";
      }
      // A single-stack model's file has one of the two columns (the other's fields are empty).
      for (const auto* line : {&e, &d})
        if (std::any_of(line->points.begin(), line->points.end(), [](const auto& p) { return !std::isnan(p.second); }))
          f.series.push_back(*line);
    }
    if (draw(f, fig_dir)) out.push_back({"perturb", f.name, "Output change against depth (" + c.name + ", perturb.csv)"});
  }
}

// ---- hessian --per-block: lambda_max of each layer's diagonal block ----
void hessian_block_figure(const Source& s, const std::string& fig_dir, std::vector<FigureRef>& out,
                          std::string& tables) {
  LineFigure f = line_figure(s.prefix + "hessian-blocks", "lambda_max of each layer's diagonal Hessian block", "layer",
                             "lambda_max of the diagonal block");
  for (const auto& c : s.cells) {
    if (!has(c, "per_block.csv")) continue;
    const std::string path = c.dir + "/per_block.csv";
    const auto t = recipe::read_csv(path);
    const int block = t.column("block");
    if (block < 0) throw std::runtime_error(path + ": no column 'block'");
    tables += "\n| " + c.name + ": block | parameters | lambda_max | lambda_min |\n|---|---|---|---|\n";
    // Blocks encoder.layers.I and decoder.layers.I become a line per stack against I;
    // embeddings and other are in the table only.
    std::map<std::string, Series> lines;
    for (const auto& r : t.rows) {
      const std::string& name = r[block];
      tables += "| " + name + " | " + show(field(t, r, "params", path), 12) + " | " + show(field(t, r, "lambda_max", path)) +
                " | " + show(field(t, r, "lambda_min", path)) + " |\n";
      const size_t dot = name.find(".layers.");
      if (dot == std::string::npos) continue;
      const std::string stack = name.substr(0, dot);
      if (!lines.count(stack)) lines[stack] = series(c.name + " " + stack, stack == "decoder");
      lines[stack].points.emplace_back(to_double(name.substr(dot + 8)), field(t, r, "lambda_max", path));
    }
    for (const auto& [stack, line] : lines) f.series.push_back(line);
  }
  if (draw(f, fig_dir))
    out.push_back({"hessian", f.name, "lambda_max of each layer's diagonal Hessian block against layer, encoder solid, "
                                      "decoder dashed (per_block.csv)"});
}

// ---- hessian: spectral densities with lambda_max marked ----
void hessian_figures(const Source& s, const std::string& fig_dir, std::vector<FigureRef>& out, std::string& tables) {
  LineFigure f = line_figure(s.prefix + "hessian-density", s.title + ": Hessian spectral density", "eigenvalue", "density", true);
  // From 1e-7 up, as PyHessian's density plot (semilogy of density + 1e-7): below it the
  // Gaussian broadening's tails between the nodes fall to underflow and hide the spectrum.
  f.ymin = 1e-7;
  std::string rows;
  for (const auto& c : s.cells) {
    if (!has(c, "density.csv")) continue;
    const std::string path = c.dir + "/density.csv";
    const auto t = recipe::read_csv(path);
    Series line = series(c.name);
    for (const auto& r : t.rows) line.points.emplace_back(field(t, r, "lambda", path), field(t, r, "density", path));
    f.series.push_back(line);
    if (!fs::exists(c.dir + "/hessian.json")) continue;
    const auto h = read_json(c.dir + "/hessian.json");
    auto num = [&](const char* k) { return number_at(h, k); };
    f.marks.emplace_back(num("lambda_max"), "lambda_max " + c.name);
    rows += "| " + c.name + " | " + show(num("lambda_max")) + " | " + show(num("lambda_min")) + " | " +
            show(num("trace")) + " | " + show(num("trace_stderr")) + " | " + show(num("sentences")) + " |\n";
  }
  if (!rows.empty())
    tables += "\n| cell | lambda_max | lambda_min | trace | trace stderr | sentences |\n|---|---|---|---|---|---|\n" + rows;
  if (draw(f, fig_dir))
    out.push_back({"hessian", f.name, "Hessian spectral density (log scale), lambda_max marked (density.csv, hessian.json)"});
  hessian_block_figure(s, fig_dir, out, tables);
}

std::string cell_table(const Source& s) {
  std::string md = "| cell | command | precision | status | exit | wall s | final valid loss | best valid loss | final valid BLEU | epochs |\n"
                   "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& c : s.cells) {
    const auto m = recipe::cell_metrics(c);
    auto get = [&](const char* k) { return m.count(k) ? show(m.at(k)) : std::string("-"); };
    md += "| " + c.name + " | " + (c.command.empty() ? "-" : c.command) + " | " + c.precision + " | " + c.status + " | " +
          (c.exit_code < 0 ? "-" : std::to_string(c.exit_code)) + " | " + show(c.wall_s, 3) + " | " +
          get("final_valid_loss") + " | " + get("best_valid_loss") + " | " + get("final_valid_bleu") + " | " +
          get("epochs") + " |\n";
  }
  return md;
}

std::string escape_cell(std::string s) {
  for (size_t i = 0; (i = s.find('|', i)) != std::string::npos; i += 2) s.replace(i, 1, "\\|");
  return s;
}

}  // namespace

ReportSummary write_report(const ReportOptions& options) {
  if (options.dirs.empty()) throw std::invalid_argument("report needs at least one folder");
  std::vector<Source> sources;
  for (size_t i = 0; i < options.dirs.size(); ++i) {
    sources.push_back(load_source(options.dirs[i]));
    if (options.dirs.size() > 1) sources.back().prefix = std::to_string(i + 1) + "-";
  }
  const std::string out = fs::absolute(options.out.empty() ? sources[0].dir + "/report" : options.out).string();
  const std::string fig_dir = out + "/figures";
  fs::create_directories(fig_dir);

  ReportSummary summary;
  summary.report_md = out + "/REPORT.md";
  nlohmann::json json = {{"sources", nlohmann::json::array()}};
  std::string md = "# normlab report\n\nWritten by `normlab report` from the files of the runs below; every number, "
                   "figure and verdict comes from what these runs measured.\n";
  for (const auto& s : sources) {
    md += "\n## " + s.title + "\n\nFolder: `" + s.dir + "`" + (s.scale.empty() ? "" : ", scale `" + s.scale + "`") +
          (s.recipe_path.empty() ? "" : ", recipe `" + s.recipe_path + "`") + ".\n";
    if (!s.description.empty()) md += "\n" + s.description + "\n";
    if (!s.paper.empty()) md += "\nPaper: " + s.paper + "\n";
    nlohmann::json js = {{"dir", s.dir}, {"title", s.title}, {"scale", s.scale}, {"claims", nlohmann::json::array()},
                         {"cells", nlohmann::json::array()}};
    if (!s.claims.empty()) {
      md += "\n### Verdicts\n\n";
      std::string table = "\n| claim | paper | verdict | measured |\n|---|---|---|---|\n";
      for (const auto& claim : s.claims) {
        const Verdict v = evaluate_claim(claim, s.cells, s.dir + "/recipe.toml:" + std::to_string(claim.line));
        md += "- **" + v.verdict + "**: " + claim.text + " (" + v.reason + ")\n";
        table += "| " + escape_cell(claim.text) + " | " + escape_cell(claim.paper.empty() ? "-" : claim.paper) + " | " +
                 v.verdict + " | " + escape_cell(v.reason) + " |\n";
        summary.verdict_lines.push_back(v.verdict + ": " + claim.text + " -- " + v.reason);
        js["claims"].push_back({{"text", claim.text}, {"rule", claim.rule}, {"paper", claim.paper},
                                {"verdict", v.verdict}, {"reason", v.reason}});
      }
      md += "\nRules: `reproduced` when the recipe's rule holds on the measured values, `not reproduced` when it "
            "does not, `inconclusive` when a value it needs was not measured (a cell failed or did not run) or two "
            "compared values differ by at most the claim's margin.\n" + table;
    }
    md += "\n### Cells\n\n" + cell_table(s);
    for (const auto& c : s.cells) {
      nlohmann::json jc = {{"name", c.name}, {"status", c.status}, {"wall_s", c.wall_s}};
      for (const auto& [k, v] : recipe::cell_metrics(c))
        if (std::isfinite(v)) jc[k] = v;
      js["cells"].push_back(jc);
    }

    std::vector<FigureRef> figures;
    std::string tables;
    training_figures(s, fig_dir, figures);
    probe_figures(s, fig_dir, figures, tables);
    sweep_figures(s, fig_dir, figures, tables);
    evaluate_table(s, tables);
    trace_figures(s, fig_dir, figures);
    perturb_figures(s, fig_dir, figures, tables);
    curvature_figures(s, fig_dir, figures);
    warmup_figures(s, fig_dir, figures);
    lr_grid_figure(s, fig_dir, figures);
    logit_figures(s, fig_dir, figures);
    hessian_figures(s, fig_dir, figures, tables);
    if (!tables.empty()) md += "\n### Measurements\n" + tables;
    if (!figures.empty()) md += "\n### Figures\n";
    for (const auto& f : figures) {
      md += "\n" + f.caption + "\n\n![" + f.name + "](figures/" + f.name + ".png) ([SVG](figures/" + f.name + ".svg))\n";
      summary.figures.push_back(fig_dir + "/" + f.name + ".png");
      js["figures"].push_back({{"kind", f.kind}, {"name", f.name}, {"png", "figures/" + f.name + ".png"},
                               {"svg", "figures/" + f.name + ".svg"}});
    }
    json["sources"].push_back(js);
  }
  core::write_file_atomic(summary.report_md, md);
  core::write_file_atomic(out + "/report.json", json.dump(1) + "\n");
  return summary;
}

}  // namespace normlab::report
