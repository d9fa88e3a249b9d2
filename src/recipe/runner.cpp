#include "recipe/runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "core/problems.h"

namespace normlab::recipe {
namespace {

namespace fs = std::filesystem;
using Values = std::vector<std::pair<std::string, std::string>>;

// The metrics summary.csv and the stderr table show, in this order.
const char* const kSummaryMetrics[] = {"final_valid_loss", "best_valid_loss", "final_valid_bleu",
                                       "final_loss", "epochs", "steps"};

std::string absolute(const std::string& p) { return p.empty() ? p : fs::absolute(p).lexically_normal().string(); }

// Placeholders every cell may use ({cell} is added per cell).
Values data_placeholders(const Recipe& recipe, const RunOptions& o) {
  Values v = {{"out", absolute(o.out)}, {"cells", absolute(o.out) + "/cells"},
              {"scale", scale_name(o.scale)}, {"src", o.src}, {"tgt", o.tgt}};
  std::string data = absolute(o.data);
  if (data.empty() && o.train.empty() && recipe.synth) data = absolute(o.out) + "/data";
  std::string train = o.train.empty() ? (data.empty() ? "" : data + "/train") : absolute(o.train);
  std::string valid = o.valid.empty() ? (data.empty() ? "" : data + "/valid") : absolute(o.valid);
  std::string test = o.test.empty() ? (data.empty() ? "" : data + "/test") : absolute(o.test);
  if (!data.empty()) v.emplace_back("data", data);
  if (!train.empty()) v.emplace_back("train", train);
  if (!valid.empty()) v.emplace_back("valid", valid);
  if (!test.empty()) v.emplace_back("test", test);
  return v;
}

// The synthetic task into DIR/data, unless it is there already from the same configuration.
void ensure_synthetic(const data::SyntheticConfig& config, const std::string& dir) {
  const nlohmann::json want = {{"seed", config.seed}, {"train", config.train}, {"valid", config.valid},
                               {"test", config.test}, {"nouns", config.nouns}, {"adjectives", config.adjectives},
                               {"transitive_verbs", config.transitive_verbs},
                               {"intransitive_verbs", config.intransitive_verbs},
                               {"prepositions", config.prepositions}, {"min_length", config.min_length},
                               {"max_length", config.max_length}};
  const std::string stamp = dir + "/synth.json";
  if (fs::exists(stamp)) {
    const auto bytes = core::read_file(stamp);
    if (nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false) == want) return;
  }
  std::cerr << "run: generating the synthetic task into " << dir << "\n";
  data::write_synthetic_task(data::generate_synthetic_task(config), dir);
  core::write_file_atomic(stamp, want.dump(1) + "\n");  // last: marks the folder complete
}

// The cell's command line after the executable (without the global options).
std::vector<std::string> cell_arguments(const Recipe& recipe, const Cell& cell, const Values& placeholders,
                                        const std::string& cell_dir, bool has_out) {
  Values values = placeholders;
  values.emplace_back("cell", cell_dir);
  std::vector<std::string> args = {cell.command};
  bool out_given = false;
  for (const auto& o : cell.options) {
    args.push_back("--" + o.key);
    if (!o.flag) args.push_back(substitute(o.value, values, recipe.path + ":" + std::to_string(o.line)));
    out_given = out_given || o.key == "out";
  }
  if (has_out && !out_given) args.insert(args.end(), {"--out", cell_dir});
  return args;
}

std::string join_args(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Runs `argv` with stdout/stderr appended to `log`, in `dir`; returns the exit code
// (128 + signal when killed). The child dies with this process (PR_SET_PDEATHSIG), so a
// killed run leaves no orphan writing into the cell folder.
int run_process(const std::vector<std::string>& argv, const std::string& dir, const std::string& log) {
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write " + log + ": " + std::strerror(errno));
  const std::string header = "# " + join_args(argv) + "\n";
  if (::write(fd, header.data(), header.size()) < 0) { /* the log header is best effort */ }
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    if (::chdir(dir.c_str()) != 0) ::_exit(126);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  ::close(fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error(std::string("waitpid failed: ") + std::strerror(errno));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string format_number(double x) {
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

}  // namespace

std::string summary_csv(const std::vector<CellResult>& cells) {
  std::vector<std::string> keys;
  for (const auto& c : cells)
    for (const auto& [k, v] : c.grid)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  std::string csv = "cell,command,status,exit_code,wall_s";
  for (const auto& k : keys) csv += "," + k;
  for (const char* m : kSummaryMetrics) csv += std::string(",") + m;
  csv += "\n";
  for (const auto& c : cells) {
    csv += c.name + "," + c.command + "," + c.status + "," + std::to_string(c.exit_code) + "," + format_number(c.wall_s);
    for (const auto& k : keys) {
      std::string v;
      for (const auto& [gk, gv] : c.grid)
        if (gk == k) v = gv;
      csv += "," + v;
    }
    const auto metrics = cell_metrics(c);
    for (const char* m : kSummaryMetrics) {
      const auto it = metrics.find(m);
      csv += "," + (it == metrics.end() ? std::string() : format_number(it->second));
    }
    csv += "\n";
  }
  return csv;
}

std::vector<CellResult> run_recipe(const Recipe& recipe, const RunOptions& o, const OptionChecker& check) {
  // Every cell's command and options are checked before anything runs.
  std::vector<std::string> problems;
  for (const auto& cell : recipe.cells) {
    const std::string where = recipe.path + ":" + std::to_string(cell.line) + ": cell '" + cell.name + "': ";
    if (auto p = check(cell.command, ""); !p.empty()) {
      problems.push_back(where + p);
      continue;
    }
    for (const auto& opt : cell.options)
      if (auto p = check(cell.command, opt.key); !p.empty())
        problems.push_back(recipe.path + ":" + std::to_string(opt.line) + ": cell '" + cell.name + "': " + p);
  }
  core::throw_if_problems(problems);
  if (!o.train.empty() && o.valid.empty()) throw std::invalid_argument("--train needs --valid as well");

  const std::string out = absolute(o.out);
  const Values placeholders = data_placeholders(recipe, o);
  std::vector<std::vector<std::string>> argvs;
  for (const auto& cell : recipe.cells)
    argvs.push_back(cell_arguments(recipe, cell, placeholders, out + "/cells/" + cell.name,
                                   check(cell.command, "out").empty()));

  if (o.dry_run) {
    for (size_t i = 0; i < recipe.cells.size(); ++i)
      std::cout << recipe.cells[i].name << "\t" << join_args(argvs[i]) << "\n";
    return {};
  }
  fs::create_directories(out + "/cells");
  core::write_file_atomic(out + "/recipe.toml", core::read_file(recipe.path));
  nlohmann::json run = {{"recipe", absolute(recipe.path)}, {"title", recipe.title},
                        {"scale", scale_name(o.scale)}, {"placeholders", nlohmann::json::object()},
                        {"cells", nlohmann::json::array()}};
  for (const auto& [k, v] : placeholders) run["placeholders"][k] = v;
  for (size_t i = 0; i < recipe.cells.size(); ++i)
    run["cells"].push_back({{"name", recipe.cells[i].name}, {"argv", argvs[i]}});
  core::write_file_atomic(out + "/run.json", run.dump(1) + "\n");
  const bool own_data = o.data.empty() && o.train.empty();
  if (recipe.synth && own_data) ensure_synthetic(*recipe.synth, out + "/data");

  std::vector<CellResult> results;
  const size_t n = recipe.cells.size();
  for (size_t i = 0; i < n; ++i) {
    const Cell& cell = recipe.cells[i];
    const std::string dir = out + "/cells/" + cell.name;
    const std::string tag = "[" + std::to_string(i + 1) + "/" + std::to_string(n) + "] " + cell.name;
    CellResult before = read_cell(out + "/cells", cell.name);
    if (before.status != "not run") {
      const auto bytes = core::read_file(dir + "/cell.json");
      const auto saved = nlohmann::json::parse(bytes.begin(), bytes.end());
      if (saved.at("argv").get<std::vector<std::string>>() != argvs[i])
        throw std::invalid_argument("cell '" + cell.name + "' in " + out + " ran with another command line (" +
                                    join_args(saved.at("argv").get<std::vector<std::string>>()) +
                                    "); use another --out for a changed recipe, scale or data");
      if (!(o.retry_failed && before.status == "failed")) {
        std::cerr << "run: " << tag << ": " << before.status << " before, skipped\n";
        results.push_back(before);
        continue;
      }
    }
    fs::create_directories(dir);
    std::vector<std::string> argv = {o.executable};
    argv.insert(argv.end(), argvs[i].begin(), argvs[i].end());
    argv.insert(argv.end(), o.cell_globals.begin(), o.cell_globals.end());
    std::cerr << "run: " << tag << ": " << join_args(argvs[i]) << "\n";
    const auto start = std::chrono::steady_clock::now();
    const int code = run_process(argv, dir, dir + "/cell.log");
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    bool diverged = code == 3;
    if (code == 0)
      for (const auto& r : read_metrics(dir + "/metrics.jsonl")) diverged = diverged || r.diverged;
    const std::string status = diverged ? "diverged" : code == 0 ? "ok" : "failed";
    nlohmann::json grid = nlohmann::json::object();
    for (const auto& [k, v] : cell.grid) grid[k] = v;
    const nlohmann::json record = {{"name", cell.name}, {"command", cell.command}, {"argv", argvs[i]},
                                   {"globals", o.cell_globals}, {"grid", grid}, {"exit_code", code},
                                   {"status", status}, {"wall_s", wall}};
    core::write_file_atomic(dir + "/cell.json", record.dump(1) + "\n");
    const CellResult result = read_cell(out + "/cells", cell.name);
    std::cerr << "run: " << tag << ": " << status << " (exit " << code << ", " << format_number(wall) << " s)"
              << (status == "failed" ? ", see " + dir + "/cell.log" : "") << "\n";
    results.push_back(result);
  }

  const std::string csv = summary_csv(results);
  core::write_file_atomic(out + "/summary.csv", csv);
  std::cerr << "\nrun: summary (" << out << "/summary.csv)\n";
  std::fprintf(stderr, "%-48s %-9s %9s %16s %15s\n", "cell", "status", "wall_s", "final_valid_loss",
               "best_valid_loss");
  for (const auto& c : results) {
    const auto m = cell_metrics(c);
    auto get = [&](const char* k) { return m.count(k) ? format_number(m.at(k)) : std::string("-"); };
    std::fprintf(stderr, "%-48s %-9s %9s %16s %15s\n", c.name.c_str(), c.status.c_str(),
                 format_number(c.wall_s).c_str(), get("final_valid_loss").c_str(), get("best_valid_loss").c_str());
  }
  return results;
}

}  // namespace normlab::recipe
