#include "recipe/recipe.h"

#include <cctype>
#include <charconv>
#include <map>
#include <set>
#include <stdexcept>

#include <toml++/toml.h>

namespace normlab::recipe {
namespace {

const char* const kScales[] = {"smoke", "cpu", "paper"};

[[noreturn]] void fail(const std::string& path, int64_t line, const std::string& what) {
  throw std::invalid_argument(path + ":" + std::to_string(line) + ": " + what);
}

int64_t line_of(const toml::node& n) { return static_cast<int64_t>(n.source().begin.line); }

// One value as it goes on the command line.
struct Value {
  std::string text;
  bool flag = false;   // true: --key alone
  bool unset = false;  // false: the option is left out
  int64_t line = 0;
};

// The shortest round-trip digits, laid out as Python's repr does (fixed notation for
// exponents -4..15, e.g. 0.0005 and 4000.0, else 1e-07), so names are predictable.
std::string shortest(double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);  // e.g. "-1.25e-04"
  const size_t e = sci.find('e');
  if (e == std::string::npos) return sci;  // inf, nan
  const int exp = std::stoi(sci.substr(e + 1));
  if (exp < -4 || exp >= 16) return sci;
  const bool negative = sci[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  std::string out;
  if (exp < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else {
    if (digits.size() < static_cast<size_t>(exp + 1)) digits.append(static_cast<size_t>(exp + 1) - digits.size(), '0');
    out = digits.substr(0, exp + 1) + "." + (digits.size() > static_cast<size_t>(exp + 1) ? digits.substr(exp + 1) : "0");
  }
  return (negative ? "-" : "") + out;
}

Value scalar(const std::string& path, const std::string& key, const toml::node& v) {
  Value out;
  out.line = line_of(v);
  if (auto s = v.as_string()) out.text = s->get();
  else if (auto i = v.as_integer()) out.text = std::to_string(i->get());
  else if (auto f = v.as_floating_point()) out.text = shortest(f->get());
  else if (auto b = v.as_boolean()) (b->get() ? out.flag : out.unset) = true;
  else fail(path, out.line, key + ": expected a string, number or boolean");
  return out;
}

// A table of options: scalars set an option, arrays (where allowed) list grid values.
struct Layer {
  std::map<std::string, Value> scalars;
  std::map<std::string, std::vector<Value>> lists;
  std::map<std::string, int64_t> list_lines;
};

Layer read_layer(const std::string& path, const toml::table& t, bool lists_allowed, const std::string& what) {
  Layer layer;
  for (auto&& [k, v] : t) {
    const std::string key(k.str());
    if (key.empty() || key[0] == '-')
      fail(path, line_of(v), what + ": option '" + key + "' must be given without leading dashes");
    if (auto a = v.as_array()) {
      if (!lists_allowed)
        fail(path, line_of(v), what + ": " + key + " is a list; grids belong in a cell's grid or a scale table");
      if (a->empty()) fail(path, line_of(v), what + ": " + key + " is an empty list");
      for (auto&& item : *a) layer.lists[key].push_back(scalar(path, key, item));
      layer.list_lines[key] = line_of(v);
    } else {
      layer.scalars[key] = scalar(path, key, v);
    }
  }
  return layer;
}

const toml::table* table_at(const std::string& path, const toml::node& v, const std::string& what) {
  const auto* t = v.as_table();
  if (!t) fail(path, line_of(v), what + " must be a table");
  return t;
}

void check_keys(const std::string& path, const toml::table& t, const std::set<std::string>& allowed,
                const std::string& what) {
  for (auto&& [k, v] : t) {
    if (allowed.count(std::string(k.str()))) continue;
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    fail(path, line_of(v), "unknown key '" + std::string(k.str()) + "' in " + what + " (expected: " + list + ")");
  }
}

std::string string_at(const std::string& path, const toml::node& v, const std::string& what) {
  if (!v.as_string()) fail(path, line_of(v), what + " must be a string");
  return v.as_string()->get();
}

void apply_synth(const std::string& path, const toml::table& t, data::SyntheticConfig& c) {
  const std::map<std::string, int64_t*> ints = {
      {"train", &c.train}, {"valid", &c.valid}, {"test", &c.test}, {"nouns", &c.nouns},
      {"adjectives", &c.adjectives}, {"transitive-verbs", &c.transitive_verbs},
      {"intransitive-verbs", &c.intransitive_verbs}, {"prepositions", &c.prepositions},
      {"min-length", &c.min_length}, {"max-length", &c.max_length}};
  std::set<std::string> allowed = {"seed"};
  for (const auto& [k, p] : ints) allowed.insert(k);
  check_keys(path, t, allowed, "[synth]");
  for (auto&& [k, v] : t) {
    if (!v.as_integer()) fail(path, line_of(v), "synth " + std::string(k.str()) + " must be an integer");
    const int64_t x = v.as_integer()->get();
    if (k.str() == "seed") c.seed = static_cast<uint64_t>(x);
    else *ints.at(std::string(k.str())) = x;
  }
}

bool valid_name(const std::string& s) {
  if (s.empty()) return false;
  for (char ch : s)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-' || ch == '=' || ch == '+'))
      return false;
  return true;
}

// Scale layers (global per command, then the cell's own) applied to options and grid.
void apply_scale(const std::string& path, const Layer& layer, std::map<std::string, Value>& options,
                 std::map<std::string, std::vector<Value>>& grid, bool cell_layer, std::set<std::string>& used) {
  for (const auto& [k, v] : layer.scalars) {
    options[k] = v;
    grid.erase(k);
  }
  for (const auto& [k, list] : layer.lists) {
    if (grid.count(k)) {
      grid[k] = list;
      used.insert(k);
    } else if (cell_layer) {
      fail(path, layer.list_lines.at(k), k + " is a list but not a grid key of this cell");
    }
  }
}

}  // namespace

Scale parse_scale(const std::string& name) {
  if (name == "smoke") return Scale::kSmoke;
  if (name == "cpu") return Scale::kCpu;
  if (name == "paper") return Scale::kPaper;
  throw std::invalid_argument("--scale must be smoke, cpu or paper, got '" + name + "'");
}

std::string scale_name(Scale scale) { return kScales[static_cast<int>(scale)]; }

Recipe load_recipe(const std::string& path, Scale scale) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    if (e.source().begin.line == 0) throw std::invalid_argument("cannot read recipe " + path + ": " + std::string(e.description()));
    fail(path, static_cast<int64_t>(e.source().begin.line), std::string(e.description()));
  }
  check_keys(path, root, {"title", "description", "paper", "synth", "defaults", "scale", "cells", "claims"},
             "the recipe");
  Recipe r;
  r.path = path;
  if (!root.contains("title")) fail(path, 1, "the recipe needs a title = \"...\"");
  r.title = string_at(path, *root.get("title"), "title");
  if (auto v = root.get("description")) r.description = string_at(path, *v, "description");
  if (auto v = root.get("paper")) r.paper = string_at(path, *v, "paper");
  const std::string sname = scale_name(scale);

  // [scale.NAME.COMMAND] and [scale.NAME.synth]
  std::map<std::string, Layer> scale_layers;  // by command, for this scale
  std::map<std::string, int64_t> scale_lines;
  const toml::table* scale_synth = nullptr;
  if (auto s = root.get("scale")) {
    const auto* st = table_at(path, *s, "[scale]");
    check_keys(path, *st, {"smoke", "cpu", "paper"}, "[scale]");
    for (auto&& [k, v] : *st) {
      const auto* per = table_at(path, v, "[scale." + std::string(k.str()) + "]");
      for (auto&& [cmd, body] : *per) {
        const std::string what = "[scale." + std::string(k.str()) + "." + std::string(cmd.str()) + "]";
        const auto* bt = table_at(path, body, what);
        if (cmd.str() == "synth") {
          data::SyntheticConfig probe;
          apply_synth(path, *bt, probe);  // checked at every scale, applied at this one
          if (k.str() == sname) scale_synth = bt;
          continue;
        }
        Layer layer = read_layer(path, *bt, true, what);
        if (k.str() == sname) {
          scale_layers[std::string(cmd.str())] = std::move(layer);
          scale_lines[std::string(cmd.str())] = line_of(body);
        }
      }
    }
  }

  if (auto s = root.get("synth")) {
    r.synth = data::SyntheticConfig{};
    apply_synth(path, *table_at(path, *s, "[synth]"), *r.synth);
    if (scale_synth) apply_synth(path, *scale_synth, *r.synth);
  } else if (scale_synth) {
    fail(path, line_of(*scale_synth), "[scale." + sname + ".synth] without a [synth] table");
  }

  std::map<std::string, Layer> defaults;
  if (auto d = root.get("defaults")) {
    for (auto&& [cmd, body] : *table_at(path, *d, "[defaults]"))
      defaults[std::string(cmd.str())] =
          read_layer(path, *table_at(path, body, "[defaults." + std::string(cmd.str()) + "]"), false,
                     "[defaults." + std::string(cmd.str()) + "]");
  }

  const auto* cells = root.get("cells");
  if (!cells || !cells->as_array() || cells->as_array()->empty())
    fail(path, cells ? line_of(*cells) : 1, "the recipe needs at least one [[cells]] table");
  std::set<std::string> names, used_lists;
  for (auto&& node : *cells->as_array()) {
    const auto* ct = table_at(path, node, "[[cells]]");
    check_keys(path, *ct, {"name", "command", "options", "grid", "scale", "ranks"}, "[[cells]]");
    const int64_t line = line_of(node);
    if (!ct->contains("name")) fail(path, line, "[[cells]] needs a name");
    const std::string base = string_at(path, *ct->get("name"), "name");
    if (!valid_name(base)) fail(path, line_of(*ct->get("name")), "cell name '" + base + "': use letters, digits, . _ - = +");
    const std::string command = ct->contains("command") ? string_at(path, *ct->get("command"), "command") : "train";
    int64_t ranks = 1;
    if (auto n = ct->get("ranks")) {
      const auto value = n->value<int64_t>();
      if (!value || *value < 1 || *value > 64) fail(path, line_of(*n), "ranks must be an integer in 1..64");
      if (command != "train" && command != "hessian")
        fail(path, line_of(*n), "ranks: only train and hessian cells run as several processes, not " + command);
      ranks = *value;
    }

    std::map<std::string, Value> options;
    if (defaults.count(command)) options = defaults[command].scalars;
    if (auto o = ct->get("options"))
      for (auto& [k, v] : read_layer(path, *table_at(path, *o, "options"), false, "cell '" + base + "' options").scalars)
        options[k] = v;
    std::map<std::string, std::vector<Value>> grid;
    if (auto g = ct->get("grid")) {
      const Layer gl = read_layer(path, *table_at(path, *g, "grid"), true, "cell '" + base + "' grid");
      if (!gl.scalars.empty())
        fail(path, gl.scalars.begin()->second.line, "grid " + gl.scalars.begin()->first + " must be a list");
      grid = gl.lists;
    }
    if (scale_layers.count(command)) apply_scale(path, scale_layers[command], options, grid, false, used_lists);
    if (auto s = ct->get("scale")) {
      const auto* st = table_at(path, *s, "cell scale");
      check_keys(path, *st, {"smoke", "cpu", "paper"}, "cell '" + base + "' scale");
      for (auto&& [k, v] : *st) {
        const Layer layer = read_layer(path, *table_at(path, v, "scale table"), true,
                                       "cell '" + base + "' scale." + std::string(k.str()));
        if (k.str() == sname) apply_scale(path, layer, options, grid, true, used_lists);
      }
    }
    for (const auto& [k, list] : grid) options.erase(k);

    // Cartesian product, keys in alphabetical order, the last key varying fastest
    // (as Python's itertools.product over the sorted keys).
    std::vector<std::pair<std::string, const std::vector<Value>*>> axes;
    for (const auto& [k, list] : grid) axes.emplace_back(k, &list);
    std::vector<size_t> index(axes.size(), 0);
    while (true) {
      Cell cell;
      cell.command = command;
      cell.ranks = ranks;
      cell.line = line;
      cell.name = base;
      std::map<std::string, Value> all = options;
      for (size_t a = 0; a < axes.size(); ++a) {
        const Value& v = (*axes[a].second)[index[a]];
        all[axes[a].first] = v;
        const std::string shown = v.flag ? "true" : v.unset ? "false" : v.text;
        cell.grid.emplace_back(axes[a].first, shown);
        cell.name += "_" + axes[a].first + "=" + shown;
      }
      if (!valid_name(cell.name))
        fail(path, line, "cell name '" + cell.name + "' from the grid: values may hold letters, digits, . _ - = +");
      if (!names.insert(cell.name).second) fail(path, line, "two cells are named '" + cell.name + "'");
      for (const auto& [k, v] : all)
        if (!v.unset) cell.options.push_back({k, v.text, v.flag, v.line});
      r.cells.push_back(std::move(cell));
      size_t a = axes.size();
      while (a > 0 && ++index[a - 1] == axes[a - 1].second->size()) index[--a] = 0;
      if (a == 0) break;
    }
  }
  for (const auto& [cmd, layer] : scale_layers)
    for (const auto& [k, list] : layer.lists)
      if (!used_lists.count(k))
        fail(path, layer.list_lines.at(k), k + " is a list in [scale." + sname + "." + cmd +
                                               "] but no " + cmd + " cell has it in its grid");

  if (auto c = root.get("claims")) {
    if (!c->as_array()) fail(path, line_of(*c), "claims must be [[claims]] tables");
    for (auto&& node : *c->as_array()) {
      const auto* t = table_at(path, node, "[[claims]]");
      check_keys(path, *t, {"text", "rule", "paper", "margin"}, "[[claims]]");
      Claim claim;
      claim.line = line_of(node);
      if (!t->contains("text") || !t->contains("rule")) fail(path, claim.line, "[[claims]] needs text and rule");
      claim.text = string_at(path, *t->get("text"), "text");
      claim.rule = string_at(path, *t->get("rule"), "rule");
      if (auto p = t->get("paper")) claim.paper = string_at(path, *p, "paper");
      if (auto m = t->get("margin")) {
        const auto x = m->value<double>();
        if (!x || *x < 0) fail(path, line_of(*m), "margin must be a non-negative number");
        claim.margin = *x;
      }
      claim.line = line_of(*t->get("rule"));
      r.claims.push_back(std::move(claim));
    }
  }
  return r;
}

std::string substitute(const std::string& text, const std::vector<std::pair<std::string, std::string>>& values,
                       const std::string& where) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const size_t open = text.find('{', i);
    if (open == std::string::npos) {
      out += text.substr(i);
      break;
    }
    const size_t close = text.find('}', open);
    if (close == std::string::npos) throw std::invalid_argument(where + ": unclosed '{' in '" + text + "'");
    const std::string name = text.substr(open + 1, close - open - 1);
    out += text.substr(i, open - i);
    bool found = false;
    for (const auto& [k, v] : values)
      if (k == name) {
        out += v;
        found = true;
        break;
      }
    if (!found) {
      std::string known;
      for (const auto& [k, v] : values) known += (known.empty() ? "{" : ", {") + k + "}";
      throw std::invalid_argument(where + ": unknown placeholder {" + name + "} (known here: " + known + ")");
    }
    i = close + 1;
  }
  return out;
}

}  // namespace normlab::recipe
