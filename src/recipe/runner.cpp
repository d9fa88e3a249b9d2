#include "recipe/runner.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/dir_lock.h"
#include "core/file_io.h"
#include "core/problems.h"
#include "core/runtime.h"

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

// Starts `argv` with stdout/stderr appended to `log`, in `dir`; returns its pid. The child
// dies with this process (PR_SET_PDEATHSIG), so a killed run leaves no orphan writing into the
// cell folder.
pid_t start_process(const std::vector<std::string>& argv, const std::string& dir, const std::string& log,
                    const std::vector<std::pair<std::string, std::string>>& env = {}) {
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write " + log + ": " + std::strerror(errno));
  const std::string header = "# " + join_args(argv) + "\n";
  if (::write(fd, header.data(), header.size()) < 0) { /* the log header is best effort */ }
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    if (::chdir(dir.c_str()) != 0) ::_exit(126);
    for (const auto& [key, value] : env) ::setenv(key.c_str(), value.c_str(), 1);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  ::close(fd);
  return pid;
}

// A TCP port on 127.0.0.1 that was free a moment ago (the kernel's pick for port 0), for a
// cell's c10d store; the next cell to need one gets another.
std::string free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket failed: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error(std::string("no free port: ") + std::strerror(errno));
  return std::to_string(ntohs(addr.sin_port));
}

// The exit code of a finished child, or -1 while it runs (128 + signal when killed).
int poll_process(pid_t pid) {
  int status = 0;
  pid_t got;
  while ((got = ::waitpid(pid, &status, WNOHANG)) < 0)
    if (errno != EINTR) throw std::runtime_error(std::string("waitpid failed: ") + std::strerror(errno));
  if (got == 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

double unix_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A cell that names an earlier cell's folder on its command line ({cells}/X/...) reads what X
// wrote, so it waits for X. Later cells do not count: run one after another they were never
// there yet either.
std::vector<std::vector<size_t>> cell_dependencies(const Recipe& recipe,
                                                   const std::vector<std::vector<std::string>>& argvs,
                                                   const std::string& cells_dir) {
  std::vector<std::vector<size_t>> deps(argvs.size());
  for (size_t i = 0; i < argvs.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      const std::string dir = cells_dir + "/" + recipe.cells[j].name;
      if (std::any_of(argvs[i].begin(), argvs[i].end(),
                      [&](const std::string& a) { return a == dir || a.rfind(dir + "/", 0) == 0; }))
        deps[i].push_back(j);
    }
  return deps;
}

// The runners sharing DIR take turns at its bookkeeping files (recipe.toml, run.json, the
// synthetic task, summary.csv) under DIR/.lock, held for moments (or while the synthetic task is
// generated), so this waits for it where a held cell is skipped instead.
std::unique_ptr<core::DirLock> lock_bookkeeping(const std::string& out) {
  for (bool told = false;; told = true) {
    try {
      return std::make_unique<core::DirLock>(out, "normlab run");
    } catch (const core::DirInUse&) {
      if (!told) std::cerr << "run: waiting for another runner to finish writing " << out << "'s own files\n";
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

// The lock on cell NAME, DIR/locks/NAME/.lock, or null with `why` set when another runner holds
// it. Not DIR/cells/NAME/.lock: that is the cell's RUN_DIR (train --out), which the child's own
// DirLock takes and would then find held by its runner. One retry after 100 ms, since a runner
// waiting for this cell (cell_dependencies) probes the lock for a moment.
std::unique_ptr<core::DirLock> try_lock_cell(const std::string& out, const std::string& name, std::string& why) {
  for (int attempt = 0;; ++attempt) {
    try {
      return std::make_unique<core::DirLock>(out + "/locks/" + name, "normlab run");
    } catch (const core::DirInUse& e) {
      if (attempt == 1) {
        why = e.what();
        return nullptr;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
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

Shard parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  auto number = [](const std::string& t) {
    const bool digits = !t.empty() && t.size() < 10 && std::all_of(t.begin(), t.end(), ::isdigit);
    return digits ? std::stoi(t) : 0;
  };
  Shard s;
  if (slash != std::string::npos) s = {number(text.substr(0, slash)), number(text.substr(slash + 1))};
  if (slash == std::string::npos || s.index < 1 || s.index > s.count)
    throw std::invalid_argument("--shard must be K/N with 1 <= K <= N (2/3: the second of three shards), not '" +
                                text + "'");
  return s;
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
  if (o.jobs < 1) throw std::invalid_argument("--jobs must be at least 1, not " + std::to_string(o.jobs));

  const std::string out = absolute(o.out);
  const std::string cells_dir = out + "/cells";
  const Values placeholders = data_placeholders(recipe, o);
  const size_t n = recipe.cells.size();
  std::vector<std::vector<std::string>> argvs;
  for (const auto& cell : recipe.cells)
    argvs.push_back(cell_arguments(recipe, cell, placeholders, cells_dir + "/" + cell.name,
                                   check(cell.command, "out").empty()));
  std::vector<size_t> pending;  // this runner's cells not started yet, in recipe order
  for (size_t i = 0; i < n; ++i)
    if (static_cast<int>(i % o.shard.count) == o.shard.index - 1) pending.push_back(i);

  if (o.dry_run) {
    for (size_t i : pending) std::cout << recipe.cells[i].name << "\t" << join_args(argvs[i]) << "\n";
    return {};
  }
  // A finished cell, whichever shard ran it, must have run this recipe's command line.
  for (size_t i = 0; i < n; ++i) {
    const std::string json = cells_dir + "/" + recipe.cells[i].name + "/cell.json";
    if (!fs::exists(json)) continue;
    const auto bytes = core::read_file(json);
    const auto saved = nlohmann::json::parse(bytes.begin(), bytes.end()).at("argv").get<std::vector<std::string>>();
    if (saved != argvs[i])
      problems.push_back("cell '" + recipe.cells[i].name + "' in " + out + " ran with another command line (" +
                         join_args(saved) + ")");
  }
  if (!problems.empty())
    throw std::invalid_argument(core::join_problems(problems) +
                                "; use another --out for a changed recipe, scale or data");

  {
    // Every shard writes the same recipe.toml and run.json (nothing in them is the shard's), so
    // whichever writes last leaves them as they were.
    const auto lock = lock_bookkeeping(out);
    fs::create_directories(cells_dir);
    core::write_file_atomic(out + "/recipe.toml", core::read_file(recipe.path));
    nlohmann::json run = {{"recipe", absolute(recipe.path)}, {"title", recipe.title},
                          {"scale", scale_name(o.scale)}, {"placeholders", nlohmann::json::object()},
                          {"cells", nlohmann::json::array()}};
    for (const auto& [k, v] : placeholders) run["placeholders"][k] = v;
    for (size_t i = 0; i < n; ++i) run["cells"].push_back({{"name", recipe.cells[i].name}, {"argv", argvs[i]}});
    core::write_file_atomic(out + "/run.json", run.dump(1) + "\n");
    const bool own_data = o.data.empty() && o.train.empty();
    if (recipe.synth && own_data) ensure_synthetic(*recipe.synth, out + "/data");
  }

  // The runner's threads shared by the cells that run at once; a cell whose recipe options set
  // `threads` keeps its own.
  const int budget = o.threads > 0 ? o.threads : core::available_cpus();
  const size_t parallel = std::min(static_cast<size_t>(o.jobs), std::max<size_t>(pending.size(), 1));
  const std::string cell_threads = std::to_string(std::max(1, budget / static_cast<int>(parallel)));
  const auto deps = cell_dependencies(recipe, argvs, cells_dir);
  auto tag = [&](size_t i) {
    return "[" + std::to_string(i + 1) + "/" + std::to_string(n) + "] " + recipe.cells[i].name;
  };

  struct Running {
    size_t cell;
    std::vector<pid_t> pids;           // one per rank
    std::vector<int> codes;            // exit codes, -1 while running
    std::unique_ptr<core::DirLock> lock;
    std::chrono::steady_clock::time_point start;
    double start_time;                 // seconds since the Unix epoch
    std::vector<std::string> globals;  // what followed the cell's own command line
  };
  std::vector<Running> running;
  auto mine = [&](size_t j) {
    return std::find(pending.begin(), pending.end(), j) != pending.end() ||
           std::any_of(running.begin(), running.end(), [&](const Running& r) { return r.cell == j; });
  };
  // Whether cell i can start now, must wait, or waits in vain for the cell `missing` that
  // nobody runs. The lock is looked at before cell.json: a runner writes cell.json before it
  // lets go of the lock, so a free lock and no cell.json mean nobody is running that cell.
  enum class Readiness { kReady, kWait, kMissing };
  auto readiness = [&](size_t i, std::string& missing) {
    for (size_t j : deps[i]) {
      if (mine(j)) return Readiness::kWait;
      std::string why;
      if (!try_lock_cell(out, recipe.cells[j].name, why)) return Readiness::kWait;
      if (read_cell(cells_dir, recipe.cells[j].name).status == "not run") {
        missing = recipe.cells[j].name;
        return Readiness::kMissing;
      }
    }
    return Readiness::kReady;
  };
  auto start = [&](size_t i) {
    const Cell& cell = recipe.cells[i];
    const std::string dir = cells_dir + "/" + cell.name;
    std::string why;
    auto lock = try_lock_cell(out, cell.name, why);
    if (!lock) {
      std::cerr << "run: " << tag(i) << ": another runner has it, skipped (" << why << ")\n";
      return;
    }
    const CellResult before = read_cell(cells_dir, cell.name);
    if (before.status != "not run" && !(o.retry_failed && before.status == "failed")) {
      std::cerr << "run: " << tag(i) << ": " << before.status << " before, skipped\n";
      return;
    }
    fs::create_directories(dir);
    std::vector<std::string> globals;
    const bool own_threads = std::any_of(cell.options.begin(), cell.options.end(),
                                         [](const CellOption& opt) { return opt.key == "threads"; });
    // A cell of several ranks shares its threads between them (as torchrun's OMP_NUM_THREADS).
    const int ranks = static_cast<int>(cell.ranks);
    if (!own_threads) globals = {"--threads", std::to_string(std::max(1, std::stoi(cell_threads) / ranks))};
    globals.insert(globals.end(), o.cell_globals.begin(), o.cell_globals.end());
    std::vector<std::string> argv = {o.executable};
    argv.insert(argv.end(), argvs[i].begin(), argvs[i].end());
    argv.insert(argv.end(), globals.begin(), globals.end());
    std::cerr << "run: " << tag(i) << ": " << join_args(argvs[i]) << "\n";
    const double start_time = unix_time();
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<pid_t> pids;
    if (ranks == 1) {
      pids.push_back(start_process(argv, dir, dir + "/cell.log"));
    } else {
      // torchrun --standalone's environment for each rank (docs/distributed.md); rank 0 logs to
      // cell.log, rank r to cell.rank<r>.log.
      const std::string port = free_port(), world = std::to_string(ranks);
      for (int r = 0; r < ranks; ++r) {
        const std::vector<std::pair<std::string, std::string>> env = {
            {"RANK", std::to_string(r)}, {"LOCAL_RANK", std::to_string(r)}, {"WORLD_SIZE", world},
            {"LOCAL_WORLD_SIZE", world}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}};
        pids.push_back(start_process(argv, dir, dir + (r == 0 ? "/cell.log" : "/cell.rank" + std::to_string(r) + ".log"),
                                     env));
      }
    }
    running.push_back({i, pids, std::vector<int>(pids.size(), -1), std::move(lock), t0, start_time, globals});
  };
  auto finish = [&](const Running& r, int code) {
    const Cell& cell = recipe.cells[r.cell];
    const std::string dir = cells_dir + "/" + cell.name;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - r.start).count();
    bool diverged = code == 3;
    if (code == 0)
      for (const auto& m : read_metrics(dir + "/metrics.jsonl")) diverged = diverged || m.diverged;
    const std::string status = diverged ? "diverged" : code == 0 ? "ok" : "failed";
    nlohmann::json grid = nlohmann::json::object();
    for (const auto& [k, v] : cell.grid) grid[k] = v;
    const nlohmann::json record = {{"name", cell.name}, {"command", cell.command}, {"argv", argvs[r.cell]},
                                   {"globals", r.globals}, {"grid", grid}, {"ranks", cell.ranks}, {"exit_code", code},
                                   {"status", status}, {"wall_s", wall}, {"start_time", r.start_time},
                                   {"end_time", unix_time()}};
    core::write_file_atomic(dir + "/cell.json", record.dump(1) + "\n");
    std::cerr << "run: " << tag(r.cell) << ": " << status << " (exit " << code << ", " << format_number(wall)
              << " s)" << (status == "failed" ? ", see " + dir + "/cell.log" : "") << "\n";
  };

  while (!pending.empty() || !running.empty()) {
    bool changed = false;
    for (auto it = pending.begin(); it != pending.end() && running.size() < static_cast<size_t>(o.jobs);) {
      const size_t i = *it;
      std::string missing;
      const Readiness ready = readiness(i, missing);
      if (ready == Readiness::kWait) {
        ++it;
        continue;
      }
      it = pending.erase(it);
      changed = true;
      if (ready == Readiness::kReady)
        start(i);
      else
        std::cerr << "run: " << tag(i) << ": needs cell " << missing << ", which has not run, skipped"
                  << " (run again once it has)\n";
    }
    for (auto it = running.begin(); it != running.end();) {
      for (size_t r = 0; r < it->pids.size(); ++r)
        if (it->codes[r] < 0) it->codes[r] = poll_process(it->pids[r]);
      if (std::any_of(it->codes.begin(), it->codes.end(), [](int c) { return c < 0; })) {
        ++it;
        continue;
      }
      // Rank 0's exit code, else the first other rank's that is not 0 (a lost rank ends the others).
      int code = it->codes[0];
      for (int c : it->codes)
        if (code == 0 && c != 0) code = c;
      finish(*it, code);
      it = running.erase(it);  // lets go of the cell's lock, after its cell.json
      changed = true;
    }
    if (!changed) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  // Every cell as found in DIR, whichever runner ran it, read under the bookkeeping lock: a
  // runner writes its last cell.json before it takes the lock, so the last summary.csv written
  // describes every finished cell.
  std::vector<CellResult> results;
  {
    const auto lock = lock_bookkeeping(out);
    for (const auto& cell : recipe.cells) {
      results.push_back(read_cell(cells_dir, cell.name));
      if (results.back().status == "not run") {  // no cell.json: its row says what it will run
        results.back().command = cell.command;
        results.back().grid = cell.grid;
      }
    }
    core::write_file_atomic(out + "/summary.csv", summary_csv(results));
  }
  std::cerr << "\nrun: summary (" << out << "/summary.csv)\n";
  std::fprintf(stderr, "%-48s %-9s %9s %16s %15s\n", "cell", "status", "wall_s", "final_valid_loss",
               "best_valid_loss");
  for (const auto& c : results) {
    const auto m = cell_metrics(c);
    auto get = [&](const char* k) { return m.count(k) ? format_number(m.at(k)) : std::string("-"); };
    std::fprintf(stderr, "%-48s %-9s %9s %16s %15s\n", c.name.c_str(), c.status.c_str(),
                 c.status == "not run" ? "-" : format_number(c.wall_s).c_str(), get("final_valid_loss").c_str(),
                 get("best_valid_loss").c_str());
  }
  return results;
}

}  // namespace normlab::recipe
