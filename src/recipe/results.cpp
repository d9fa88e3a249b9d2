#include "recipe/results.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/file_io.h"

namespace normlab::recipe {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

double number(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : kNaN;
}

}  // namespace

std::vector<MetricsRecord> read_metrics(const std::string& path) {
  std::vector<MetricsRecord> out;
  std::ifstream in(path);
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(path + ":" + std::to_string(n) + ": not a JSON record (" + e.what() + ")");
    }
    MetricsRecord r;
    r.step = j.value("step", int64_t{0});
    r.epoch = j.value("epoch", int64_t{0});
    r.loss = number(j, "loss");
    r.grad_norm = number(j, "grad_norm");
    r.lr = number(j, "lr");
    r.valid_loss = number(j, "valid_loss");
    r.valid_nll = number(j, "valid_nll");
    r.valid_bleu = number(j, "valid_bleu");
    r.valid_accuracy = number(j, "valid_accuracy");
    r.test_loss = number(j, "test_loss");
    r.init_valid_loss = number(j, "init_valid_loss");
    r.validation = j.contains("valid_loss");
    r.diverged = j.value("event", std::string()) == "diverged";
    out.push_back(r);
  }
  return out;
}

CellResult read_cell(const std::string& cells_dir, const std::string& name) {
  CellResult c;
  c.name = name;
  c.dir = cells_dir + "/" + name;
  c.status = "not run";
  const std::string path = c.dir + "/cell.json";
  if (!std::filesystem::exists(path)) return c;
  const auto bytes = core::read_file(path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(bytes.begin(), bytes.end());
    c.status = j.at("status").get<std::string>();
    c.command = j.at("command").get<std::string>();
    c.exit_code = j.at("exit_code").get<int>();
    c.wall_s = j.at("wall_s").get<double>();
    for (const auto& [k, v] : j.at("grid").items()) c.grid.emplace_back(k, v.get<std::string>());
    const auto argv = j.value("argv", std::vector<std::string>{});
    for (size_t i = 0; i + 1 < argv.size(); ++i)
      if (argv[i] == "--precision") c.precision = argv[i + 1];
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": not a cell record (" + e.what() + ")");
  }
  // `auto` is resolved when the cell starts: a training cell's config.json says to what.
  const std::string config = c.dir + "/config.json";
  if (c.precision == "auto" && std::filesystem::exists(config)) {
    const auto text = core::read_file(config);
    const auto resolved = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
    if (resolved.is_object() && resolved.contains("precision") && resolved["precision"].is_string())
      c.precision = "auto: " + resolved["precision"].get<std::string>();
  }
  return c;
}

std::map<std::string, double> cell_metrics(const CellResult& cell) {
  std::map<std::string, double> m;
  if (cell.status == "not run") return m;
  m["wall_s"] = cell.wall_s;
  const auto records = read_metrics(cell.dir + "/metrics.jsonl");
  const bool diverged = cell.status == "diverged";
  double best_loss = kInf, best_bleu = -kInf, best_accuracy = -kInf;
  const MetricsRecord* last_valid = nullptr;
  const MetricsRecord* last_train = nullptr;
  for (const auto& r : records) {
    if (r.validation) {
      last_valid = &r;
      if (r.valid_loss < best_loss) best_loss = r.valid_loss;
      if (!std::isnan(r.valid_bleu) && r.valid_bleu > best_bleu) best_bleu = r.valid_bleu;
      if (!std::isnan(r.valid_accuracy) && r.valid_accuracy > best_accuracy) best_accuracy = r.valid_accuracy;
    } else if (!r.diverged && !std::isnan(r.loss) && std::isnan(r.test_loss)) {
      last_train = &r;
    }
    if (!std::isnan(r.test_loss)) m["test_loss"] = diverged ? kInf : r.test_loss;
    if (!std::isnan(r.init_valid_loss)) m["init_valid_loss"] = r.init_valid_loss;
    if (r.step > 0) m["steps"] = static_cast<double>(r.step);
  }
  if (last_valid) {
    m["best_valid_loss"] = best_loss;
    m["final_valid_loss"] = diverged ? kInf : last_valid->valid_loss;
    m["final_valid_ppl"] = diverged ? kInf : std::exp(last_valid->valid_nll);
    m["epochs"] = static_cast<double>(last_valid->epoch);
    if (best_bleu > -kInf) {
      m["best_valid_bleu"] = best_bleu;
      m["final_valid_bleu"] = diverged ? 0.0 : last_valid->valid_bleu;
    }
    if (best_accuracy > -kInf) {  // a classifier's (a diverged one's final accuracy is chance's or worse: 0)
      m["best_valid_accuracy"] = best_accuracy;
      m["final_valid_accuracy"] = diverged ? 0.0 : last_valid->valid_accuracy;
    }
  } else if (diverged) {
    m["final_valid_loss"] = kInf;
  }
  if (last_train) m["final_loss"] = diverged ? kInf : last_train->loss;
  return m;
}

int CsvTable::column(const std::string& name) const {
  for (size_t i = 0; i < columns.size(); ++i)
    if (columns[i] == name) return static_cast<int>(i);
  return -1;
}

CsvTable read_table(const std::string& path) {
  const std::string suffix = ".jsonl";
  if (path.size() < suffix.size() || path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0)
    return read_csv(path);
  CsvTable t;
  std::vector<nlohmann::json> records;
  std::ifstream in(path);
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) throw std::runtime_error(path + ":" + std::to_string(n) + ": not a JSON object");
    for (const auto& [key, value] : j.items())
      if (!value.is_structured() && t.column(key) < 0) t.columns.push_back(key);
    records.push_back(std::move(j));
  }
  for (const auto& j : records) {
    std::vector<std::string> row;
    for (const auto& key : t.columns) {
      const auto it = j.find(key);
      if (it == j.end() || it->is_null()) {
        row.emplace_back();
      } else if (it->is_number()) {
        char buf[40];
        std::snprintf(buf, sizeof buf, "%.17g", it->get<double>());
        row.emplace_back(buf);
      } else {
        row.push_back(it->is_string() ? it->get<std::string>() : it->dump());
      }
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

CsvTable read_csv(const std::string& path) {
  const auto bytes = core::read_file(path);
  const std::string text(bytes.begin(), bytes.end());
  auto split = [](const std::string& line) {
    std::vector<std::string> fields(1);
    for (char ch : line) {
      if (ch == ',') fields.emplace_back();
      else if (ch != '\r') fields.back() += ch;
    }
    return fields;
  };
  CsvTable t;
  size_t pos = 0;
  for (int64_t n = 1; pos < text.size(); ++n) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) continue;
    if (t.columns.empty()) {
      t.columns = split(line);
      continue;
    }
    t.rows.push_back(split(line));
    if (t.rows.back().size() != t.columns.size())
      throw std::runtime_error(path + ":" + std::to_string(n) + ": " + std::to_string(t.rows.back().size()) +
                               " fields, the header has " + std::to_string(t.columns.size()));
  }
  return t;
}

}  // namespace normlab::recipe
