#include "report/claims.h"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/file_io.h"

namespace normlab::report {
namespace {

enum class Truth { kFalse, kTrue, kUnknown };

struct Value {
  double x = 0;
  bool known = true;
  std::string text;       // how it was obtained and what it was, for the reason line
  bool compound = false;  // arithmetic of several terms: the reason line also shows the result
};

const std::set<std::string> kMetrics = {"final_valid_loss", "best_valid_loss", "final_valid_bleu",
                                        "best_valid_bleu", "final_valid_accuracy", "best_valid_accuracy", "final_valid_ppl", "final_loss", "test_loss", "init_valid_loss",
                                        "epochs", "steps", "wall_s"};

std::string show(double x) {
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

// One side of a comparison for the reason line: the terms, and the result when it was computed
// from several ("0 - json(...) = -68.17 [= 68.17]").
std::string side(const Value& v) {
  return v.compound && v.known ? v.text + " [= " + show(v.x) + "]" : v.text;
}

bool is_aggregate(const std::string& name) { return name == "min" || name == "max" || name == "mean"; }

// min, max or mean of a non-empty list.
double aggregate(const std::string& agg, const std::vector<double>& xs) {
  double r = xs[0], total = 0;
  for (double x : xs) {
    r = agg == "min" ? std::min(r, x) : std::max(r, x);
    total += x;
  }
  return agg == "mean" ? total / static_cast<double>(xs.size()) : r;
}

// Recursive descent that evaluates as it parses; without cells it only checks the syntax.
class Rule {
 public:
  Rule(const std::string& text, const std::string& where, const std::vector<recipe::CellResult>* cells,
       double margin)
      : s_(text), where_(where), cells_(cells), margin_(margin) {}

  Truth run() {
    const Truth t = disjunction();
    skip();
    if (i_ != s_.size()) error("unexpected '" + s_.substr(i_, 12) + "'");
    return t;
  }
  std::vector<std::string> decided, unknown;  // reason pieces

 private:
  [[noreturn]] void error(const std::string& what) const {
    throw std::invalid_argument(where_ + ": rule '" + s_ + "': " + what + ", at column " + std::to_string(i_ + 1));
  }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(const std::string& token) {
    skip();
    if (s_.compare(i_, token.size(), token) != 0) return false;
    const bool word = std::isalpha(static_cast<unsigned char>(token[0]));
    const size_t end = i_ + token.size();
    if (word && end < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[end])) || s_[end] == '_')) return false;
    i_ = end;
    return true;
  }
  void expect(const std::string& token) {
    if (!eat(token)) error("expected '" + token + "'");
  }
  std::string identifier() {
    skip();
    const size_t start = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) ++i_;
    return s_.substr(start, i_ - start);
  }
  std::string pattern() {
    skip();
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] != ')' && s_[i_] != ',' && !std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
    if (i_ == start) error("expected a cell name or pattern");
    return s_.substr(start, i_ - start);
  }
  // A grid key as recipes name them: letters, digits, '-' and '_'.
  std::string grid_key() {
    skip();
    const size_t start = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' || s_[i_] == '_')) ++i_;
    if (i_ == start) error("expected a grid key after 'over'");
    return s_.substr(start, i_ - start);
  }
  // METRIC '(' PATTERN ')'
  std::pair<std::string, std::string> metric_of_pattern() {
    const std::string metric = identifier();
    if (!kMetrics.count(metric)) error("unknown metric '" + metric + "'");
    expect("(");
    const std::string p = pattern();
    expect(")");
    return {metric, p};
  }
  std::string quoted() {
    skip();
    if (i_ >= s_.size() || s_[i_] != '"') error("expected a \"string\"");
    const size_t close = s_.find('"', i_ + 1);
    if (close == std::string::npos) error("unclosed string");
    const std::string v = s_.substr(i_ + 1, close - i_ - 1);
    i_ = close + 1;
    return v;
  }

  Truth disjunction() {
    Truth t = conjunction();
    while (eat("or")) {
      const Truth u = conjunction();
      t = (t == Truth::kTrue || u == Truth::kTrue) ? Truth::kTrue
          : (t == Truth::kUnknown || u == Truth::kUnknown) ? Truth::kUnknown : Truth::kFalse;
    }
    return t;
  }
  Truth conjunction() {
    Truth t = negation();
    while (eat("and")) {
      const Truth u = negation();
      t = (t == Truth::kFalse || u == Truth::kFalse) ? Truth::kFalse
          : (t == Truth::kUnknown || u == Truth::kUnknown) ? Truth::kUnknown : Truth::kTrue;
    }
    return t;
  }
  Truth negation() {
    if (eat("not")) {
      const Truth t = negation();
      return t == Truth::kUnknown ? t : t == Truth::kTrue ? Truth::kFalse : Truth::kTrue;
    }
    return atom();
  }
  Truth atom() {
    if (eat("(")) {
      const Truth t = disjunction();
      expect(")");
      return t;
    }
    for (const char* status : {"ok", "diverged", "failed"})
      if (eat(status)) {
        expect("(");
        const std::string p = pattern();
        expect(")");
        return status_of(status, p);
      }
    const Value a = sum();
    skip();
    std::string op;
    for (const char* c : {"<=", ">=", "<", ">"})
      if (eat(c)) {
        op = c;
        break;
      }
    if (op.empty()) error("expected a comparison (< <= > >=)");
    const Value b = sum();
    if (!cells_) return Truth::kUnknown;
    const std::string text = side(a) + " " + op + " " + side(b);
    if (!a.known || !b.known) {
      unknown.push_back(text);
      return Truth::kUnknown;
    }
    if (std::isfinite(a.x) && std::isfinite(b.x) && std::fabs(a.x - b.x) <= margin_) {
      unknown.push_back(text + ": within the margin " + show(margin_));
      return Truth::kUnknown;
    }
    const bool r = op == "<" ? a.x < b.x : op == "<=" ? a.x <= b.x : op == ">" ? a.x > b.x : a.x >= b.x;
    decided.push_back(text + (r ? " holds" : " does not hold"));
    return r ? Truth::kTrue : Truth::kFalse;
  }
  Value sum() {
    Value v = product();
    while (true) {
      const bool plus = eat("+");
      if (!plus && !eat("-")) return v;
      const Value w = product();
      v = {plus ? v.x + w.x : v.x - w.x, v.known && w.known, v.text + (plus ? " + " : " - ") + w.text, true};
    }
  }
  Value product() {
    Value v = value();
    while (true) {
      const bool times = eat("*");
      if (!times && !eat("/")) return v;
      const Value w = value();
      v = {times ? v.x * w.x : v.x / w.x, v.known && w.known, v.text + (times ? " * " : " / ") + w.text, true};
    }
  }
  Value value() {
    skip();
    if (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.')) {
      size_t used = 0;
      const double x = std::stod(s_.substr(i_), &used);
      i_ += used;
      return {x, true, show(x)};
    }
    const size_t start = i_;
    const std::string name = identifier();
    if (is_aggregate(name)) {
      expect("(");
      const size_t inner_at = i_;
      const std::string inner = identifier();
      if (is_aggregate(inner)) {  // AGG(AGG(METRIC(PATTERN) over KEY))
        expect("(");
        const auto [metric, p] = metric_of_pattern();
        expect("over");
        const std::string key = grid_key();
        expect(")");
        expect(")");
        return measure_over(name, inner, metric, p, key);
      }
      i_ = inner_at;
      const auto [metric, p] = metric_of_pattern();
      expect(")");
      return measure(name, metric, p, {});
    }
    if (kMetrics.count(name)) {
      expect("(");
      const std::string p = pattern();
      expect(")");
      return measure("", name, p, {});
    }
    if (name == "json" || name == "csv") {
      expect("(");
      const std::string p = pattern();
      std::vector<std::string> args;
      while (eat(",")) args.push_back(quoted());
      expect(")");
      if (name == "json" && args.size() != 2) error("json(CELL, \"FILE\", \"KEY.PATH\") takes 3 arguments");
      if (name == "csv" && (args.size() < 3 || args.size() > 4))
        error("csv(CELL, \"FILE\", \"COLUMN\", \"AGG\" [, \"COL=VALUE ...\"]) takes 4 or 5 arguments");
      if (name == "csv" && !std::set<std::string>{"min", "max", "mean", "first", "last"}.count(args[2]))
        error("csv's AGG must be min, max, mean, first or last");
      return measure("", name, p, args);
    }
    i_ = start;
    error("expected a number, a metric (" + std::string("final_valid_loss, best_valid_loss, ...") +
          "), min/max/mean(...), json(...) or csv(...)");
  }

  std::vector<const recipe::CellResult*> match(const std::string& p) {
    std::vector<const recipe::CellResult*> out;
    for (const auto& c : *cells_)
      if (::fnmatch(p.c_str(), c.name.c_str(), 0) == 0) out.push_back(&c);
    return out;
  }

  Truth status_of(const std::string& status, const std::string& p) {
    if (!cells_) return Truth::kUnknown;
    const std::string text = status + "(" + p + ")";
    const auto matched = match(p);
    if (matched.empty()) {
      unknown.push_back(text + ": no such cell");
      return Truth::kUnknown;
    }
    bool all = true;
    for (const auto* c : matched) {
      if (c->status == "not run" || (c->status == "failed" && status != "failed")) {
        unknown.push_back(text + ": " + c->name + " " + c->status);
        return Truth::kUnknown;
      }
      all = all && c->status == status;
    }
    decided.push_back(text + (all ? " holds" : " does not hold"));
    return all ? Truth::kTrue : Truth::kFalse;
  }

  // One number from the matched cells: a named metric, a JSON field or a CSV column.
  Value measure(const std::string& agg, const std::string& kind, const std::string& p,
                const std::vector<std::string>& args) {
    std::string text = kind + "(" + p;
    for (const auto& a : args) text += ", \"" + a + "\"";
    text += ")";
    if (!agg.empty()) text = agg + "(" + text + ")";
    if (!cells_) return {0, false, text};
    const auto matched = match(p);
    if (matched.empty()) return {0, false, text + " [no such cell]"};
    if (matched.size() > 1 && agg.empty())
      return {0, false, text + " [" + std::to_string(matched.size()) + " cells match: use min/max/mean]"};
    std::vector<double> xs;
    if (auto missing = gather(matched, kind, args, text, xs)) return *missing;
    const double r = agg.empty() ? xs[0] : aggregate(agg, xs);
    return {r, true, text + " = " + show(r)};
  }

  // OUTER(INNER(METRIC(PATTERN) over KEY)): the matched cells grouped by their grid point
  // without KEY, INNER within each group (e.g. the best over a learning-rate grid), OUTER
  // across the groups (e.g. the mean over checkpoints).
  Value measure_over(const std::string& outer, const std::string& inner, const std::string& metric,
                     const std::string& p, const std::string& key) {
    const std::string text = outer + "(" + inner + "(" + metric + "(" + p + ") over " + key + "))";
    if (!cells_) return {0, false, text};
    const auto matched = match(p);
    if (matched.empty()) return {0, false, text + " [no such cell]"};
    std::vector<double> xs;
    if (auto missing = gather(matched, metric, {}, text, xs)) return *missing;
    std::map<std::vector<std::pair<std::string, std::string>>, std::vector<double>> groups;
    for (size_t i = 0; i < matched.size(); ++i) {
      auto rest = matched[i]->grid;
      const auto k = std::find_if(rest.begin(), rest.end(), [&](const auto& kv) { return kv.first == key; });
      if (k == rest.end()) return {0, false, text + " [" + matched[i]->name + " has no grid key " + key + "]"};
      rest.erase(k);
      groups[rest].push_back(xs[i]);
    }
    std::vector<double> per_group;
    for (const auto& [rest, xs] : groups) per_group.push_back(aggregate(inner, xs));
    const double r = aggregate(outer, per_group);
    return {r, true, text + " = " + show(r) + " [" + std::to_string(groups.size()) + " groups]"};
  }

  // Each matched cell's value into xs (in order); or, when one is missing, the unknown Value
  // that names the cell and why.
  std::optional<Value> gather(const std::vector<const recipe::CellResult*>& matched, const std::string& kind,
                              const std::vector<std::string>& args, const std::string& text,
                              std::vector<double>& xs) {
    for (const auto* c : matched) {
      double x = 0;
      const std::string missing = one(*c, kind, args, x);
      if (!missing.empty()) return Value{0, false, text + " [" + c->name + ": " + missing + "]"};
      xs.push_back(x);
    }
    return std::nullopt;
  }

  // "" and x set, or why the value is missing.
  static std::string one(const recipe::CellResult& c, const std::string& kind, const std::vector<std::string>& args,
                         double& x) {
    if (c.status == "not run" || c.status == "failed") return c.status;
    if (kind == "json") {
      const std::string path = c.dir + "/" + args[0];
      if (!std::filesystem::exists(path)) return "no " + args[0];
      const auto bytes = core::read_file(path);
      auto j = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
      for (size_t start = 0; start <= args[1].size();) {
        const size_t dot = std::min(args[1].find('.', start), args[1].size());
        const std::string key = args[1].substr(start, dot - start);
        if (j.is_array() && !key.empty() && std::isdigit(static_cast<unsigned char>(key[0])) &&
            std::stoul(key) < j.size())
          j = j[std::stoul(key)];
        else if (j.is_object() && j.contains(key))
          j = j[key];
        else
          return args[0] + " has no " + args[1];
        start = dot + 1;
      }
      if (!j.is_number()) return args[0] + ": " + args[1] + " is not a number";
      x = j.get<double>();
      return "";
    }
    if (kind == "csv") {
      const std::string path = c.dir + "/" + args[0];
      if (!std::filesystem::exists(path)) return "no " + args[0];
      const auto table = recipe::read_table(path);  // CSV, or JSON lines (curvature.jsonl)
      const int col = table.column(args[1]);
      if (col < 0) return args[0] + " has no column " + args[1];
      std::vector<std::pair<int, std::string>> filter;
      if (args.size() == 4) {
        std::string rest = args[3] + " ";
        for (size_t start = 0, sp; (sp = rest.find(' ', start)) != std::string::npos; start = sp + 1) {
          const std::string kv = rest.substr(start, sp - start);
          if (kv.empty()) continue;
          const size_t eq = kv.find('=');
          const int fc = eq == std::string::npos ? -1 : table.column(kv.substr(0, eq));
          if (fc < 0) return args[0] + ": bad filter '" + kv + "'";
          filter.emplace_back(fc, kv.substr(eq + 1));
        }
      }
      std::vector<double> xs;
      for (const auto& row : table.rows) {
        bool keep = true;
        for (const auto& [fc, v] : filter) keep = keep && row[fc] == v;
        if (!keep || row[col].empty()) continue;  // empty: no value (a JSON null)
        char* end = nullptr;
        const double v = std::strtod(row[col].c_str(), &end);
        if (!end || *end != '\0') return args[0] + ": " + args[1] + " '" + row[col] + "' is not a number";
        xs.push_back(v);
      }
      if (xs.empty()) return args[0] + ": no row matches";
      const std::string& agg = args[2];
      x = agg == "first" ? xs.front() : agg == "last" ? xs.back() : aggregate(agg, xs);
      return "";
    }
    const auto m = recipe::cell_metrics(c);
    const auto it = m.find(kind);
    if (it == m.end()) return "no " + kind + " measured";
    x = it->second;
    return "";
  }

  const std::string s_, where_;
  const std::vector<recipe::CellResult>* cells_;
  const double margin_;
  size_t i_ = 0;
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : "; ") + x;
  return s;
}

}  // namespace

void check_rule(const std::string& rule, const std::string& where) { Rule(rule, where, nullptr, 0).run(); }

Verdict evaluate_claim(const recipe::Claim& claim, const std::vector<recipe::CellResult>& cells,
                       const std::string& where) {
  Rule rule(claim.rule, where, &cells, claim.margin);
  const Truth t = rule.run();
  if (t == Truth::kUnknown) return {"inconclusive", join(rule.unknown)};
  return {t == Truth::kTrue ? "reproduced" : "not reproduced", join(rule.decided)};
}

}  // namespace normlab::report
