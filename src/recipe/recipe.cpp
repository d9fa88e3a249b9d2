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

}  // namespace

std::string grid_suffix(const std::string& key, const std::string& value) { return "_" + key + "=" + value; }

bool valid_cell_name(const std::string& s) {
  if (s.empty() || s == "." || s == "..") return false;  // the results folder itself, or its parent
  for (char ch : s)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-' || ch == '=' || ch == '+'))
      return false;
  return true;
}

namespace {

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

// [scale.NAME.COMMAND] tables of the chosen scale (every scale's are checked), and its [scale.NAME.synth].
struct ScaleTables {
  std::map<std::string, Layer> by_command;
  const toml::table* synth = nullptr;
};

ScaleTables read_scale_tables(const std::string& path, const toml::table& root, const std::string& sname) {
  ScaleTables out;
  auto s = root.get("scale");
  if (!s) return out;
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
        if (k.str() == sname) out.synth = bt;
        continue;
      }
      Layer layer = read_layer(path, *bt, true, what);
      if (k.str() == sname) out.by_command[std::string(cmd.str())] = std::move(layer);
    }
  }
  return out;
}

// [synth], with the scale's [scale.NAME.synth] over it.
std::optional<data::SyntheticConfig> read_synth(const std::string& path, const toml::table& root,
                                                const toml::table* scale_synth, const std::string& sname) {
  if (auto s = root.get("synth")) {
    data::SyntheticConfig synth;
    apply_synth(path, *table_at(path, *s, "[synth]"), synth);
    if (scale_synth) apply_synth(path, *scale_synth, synth);
    return synth;
  }
  if (scale_synth) fail(path, line_of(*scale_synth), "[scale." + sname + ".synth] without a [synth] table");
  return std::nullopt;
}

// [defaults.COMMAND] tables, by command.
std::map<std::string, Layer> read_defaults(const std::string& path, const toml::table& root) {
  std::map<std::string, Layer> defaults;
  if (auto d = root.get("defaults"))
    for (auto&& [cmd, body] : *table_at(path, *d, "[defaults]")) {
      const std::string what = "[defaults." + std::string(cmd.str()) + "]";
      defaults[std::string(cmd.str())] = read_layer(path, *table_at(path, body, what), false, what);
    }
  return defaults;
}

int64_t read_ranks(const std::string& path, const toml::table& ct, const std::string& command) {
  auto n = ct.get("ranks");
  if (!n) return 1;
  const auto value = n->value<int64_t>();
  if (!value || *value < 1 || *value > 64) fail(path, line_of(*n), "ranks must be an integer in 1..64");
  if (command != "train" && command != "hessian")
    fail(path, line_of(*n), "ranks: only train and hessian cells run as several processes, not " + command);
  return *value;
}

// A [[cells]] table's options and grid: the command's defaults, its options, its grid, the
// scale's tables over them (the recipe's, then the cell's own). Grid keys leave the options.
struct CellAxes {
  std::map<std::string, Value> options;
  std::map<std::string, std::vector<Value>> grid;
};

CellAxes read_cell_axes(const std::string& path, const toml::table& ct, const std::string& base,
                        const std::string& command, const std::string& sname, std::map<std::string, Layer>& defaults,
                        std::map<std::string, Layer>& scale_layers, std::set<std::string>& used_lists) {
  CellAxes out;
  if (defaults.count(command)) out.options = defaults[command].scalars;
  if (auto o = ct.get("options"))
    for (auto& [k, v] : read_layer(path, *table_at(path, *o, "options"), false, "cell '" + base + "' options").scalars)
      out.options[k] = v;
  if (auto g = ct.get("grid")) {
    const Layer gl = read_layer(path, *table_at(path, *g, "grid"), true, "cell '" + base + "' grid");
    if (!gl.scalars.empty())
      fail(path, gl.scalars.begin()->second.line, "grid " + gl.scalars.begin()->first + " must be a list");
    out.grid = gl.lists;
  }
  if (scale_layers.count(command))
    apply_scale(path, scale_layers[command], out.options, out.grid, false, used_lists);
  if (auto s = ct.get("scale")) {
    const auto* st = table_at(path, *s, "cell scale");
    check_keys(path, *st, {"smoke", "cpu", "paper"}, "cell '" + base + "' scale");
    for (auto&& [k, v] : *st) {
      const Layer layer = read_layer(path, *table_at(path, v, "scale table"), true,
                                     "cell '" + base + "' scale." + std::string(k.str()));
      if (k.str() == sname) apply_scale(path, layer, out.options, out.grid, true, used_lists);
    }
  }
  for (const auto& [k, list] : out.grid) out.options.erase(k);
  return out;
}

// The cells of `axes`' Cartesian product, keys in alphabetical order, the last key varying
// fastest (as Python's itertools.product over the sorted keys), each named after its values.
void expand_grid(const std::string& path, const Cell& proto, const CellAxes& cell_axes, std::set<std::string>& names,
                 std::vector<Cell>& cells) {
  std::vector<std::pair<std::string, const std::vector<Value>*>> axes;
  for (const auto& [k, list] : cell_axes.grid) axes.emplace_back(k, &list);
  std::vector<size_t> index(axes.size(), 0);
  while (true) {
    Cell cell = proto;
    std::map<std::string, Value> all = cell_axes.options;
    for (size_t a = 0; a < axes.size(); ++a) {
      const Value& v = (*axes[a].second)[index[a]];
      all[axes[a].first] = v;
      const std::string shown = v.flag ? "true" : v.unset ? "false" : v.text;
      cell.grid.emplace_back(axes[a].first, shown);
      cell.name += grid_suffix(axes[a].first, shown);
    }
    if (!valid_cell_name(cell.name))
      fail(path, proto.line, "cell name '" + cell.name + "' from the grid: values may hold letters, digits, . _ - = +");
    if (!names.insert(cell.name).second) fail(path, proto.line, "two cells are named '" + cell.name + "'");
    for (const auto& [k, v] : all)
      if (!v.unset) cell.options.push_back({k, v.text, v.flag, v.line});
    cells.push_back(std::move(cell));
    size_t a = axes.size();
    while (a > 0 && ++index[a - 1] == axes[a - 1].second->size()) index[--a] = 0;
    if (a == 0) break;
  }
}

// The number of cells `axes` expands to (the product of its lists' sizes), computed before
// expanding: fails naming the table when it, or the recipe's count so far (`total`, which it
// raises), passes kMaxCells (2^24 cells once took 18 s into std::bad_alloc).
void count_cells(const std::string& path, const Cell& proto, const CellAxes& axes, int64_t& total) {
  int64_t product = 1;
  bool overflow = false;
  for (const auto& [k, list] : axes.grid)
    overflow = overflow || __builtin_mul_overflow(product, static_cast<int64_t>(list.size()), &product);
  const std::string limit = ", more than the " + std::to_string(kMaxCells) + " a recipe may hold";
  if (overflow || product > kMaxCells)
    fail(path, proto.line, "cell '" + proto.name + "': its grid expands to " +
                               (overflow ? "more than 2^63" : std::to_string(product)) + " cells (the product of its " +
                               std::to_string(axes.grid.size()) + " lists' sizes)" + limit);
  total += product;
  if (total > kMaxCells)
    fail(path, proto.line, "cell '" + proto.name + "': its grid's " + std::to_string(product) +
                               " cells bring the recipe to " + std::to_string(total) + " cells" + limit);
}

// Every [[cells]] table, expanded.
std::vector<Cell> read_cells(const std::string& path, const toml::table& root, const std::string& sname,
                             std::map<std::string, Layer>& scale_layers) {
  auto defaults = read_defaults(path, root);
  const auto* cells = root.get("cells");
  if (!cells || !cells->as_array() || cells->as_array()->empty())
    fail(path, cells ? line_of(*cells) : 1, "the recipe needs at least one [[cells]] table");
  std::vector<Cell> out;
  std::set<std::string> names, used_lists;
  int64_t total = 0;
  for (auto&& node : *cells->as_array()) {
    const auto* ct = table_at(path, node, "[[cells]]");
    check_keys(path, *ct, {"name", "command", "options", "grid", "scale", "ranks"}, "[[cells]]");
    Cell proto;
    proto.line = line_of(node);
    if (!ct->contains("name")) fail(path, proto.line, "[[cells]] needs a name");
    proto.name = string_at(path, *ct->get("name"), "name");
    if (!valid_cell_name(proto.name))
      fail(path, line_of(*ct->get("name")),
           "cell name '" + proto.name + "': use letters, digits, . _ - = + (not . or .. alone)");
    proto.command = ct->contains("command") ? string_at(path, *ct->get("command"), "command") : "train";
    proto.ranks = read_ranks(path, *ct, proto.command);
    const auto axes = read_cell_axes(path, *ct, proto.name, proto.command, sname, defaults, scale_layers, used_lists);
    count_cells(path, proto, axes, total);
    expand_grid(path, proto, axes, names, out);
  }
  for (const auto& [cmd, layer] : scale_layers)
    for (const auto& [k, list] : layer.lists)
      if (!used_lists.count(k))
        fail(path, layer.list_lines.at(k), k + " is a list in [scale." + sname + "." + cmd +
                                               "] but no " + cmd + " cell has it in its grid");
  return out;
}

std::vector<Claim> read_claims(const std::string& path, const toml::table& root) {
  std::vector<Claim> out;
  auto c = root.get("claims");
  if (!c) return out;
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
    out.push_back(std::move(claim));
  }
  return out;
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
  auto scale_tables = read_scale_tables(path, root, sname);
  r.synth = read_synth(path, root, scale_tables.synth, sname);
  r.cells = read_cells(path, root, sname, scale_tables.by_command);
  r.claims = read_claims(path, root);
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
