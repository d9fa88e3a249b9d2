#include "recipe/runner.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fnmatch.h>
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

namespace {

// Every cell's command and options, every problem at once: a problem of many cells (one
// option line in a grid's table) once, with the first cell's name and the count of the others.
void check_cells(const Recipe& recipe, const RunOptions& o, const OptionChecker& check) {
  struct Seen {
    std::string first_cell;
    int64_t others = 0;
  };
  std::vector<std::pair<std::pair<int64_t, std::string>, Seen>> problems;  // (line, problem), in order found
  const auto add = [&](int64_t line, const std::string& problem, const std::string& cell) {
    for (auto& [key, seen] : problems)
      if (key.first == line && key.second == problem) return void(++seen.others);
    problems.push_back({{line, problem}, {cell, 0}});
  };
  for (const auto& cell : recipe.cells) {
    if (auto p = check(cell.command, ""); !p.empty()) {
      add(cell.line, p, cell.name);
      continue;
    }
    for (const auto& opt : cell.options)
      if (auto p = check(cell.command, opt.key); !p.empty()) add(opt.line, p, cell.name);
  }
  std::vector<std::string> lines;
  for (const auto& [key, seen] : problems)
    lines.push_back(recipe.path + ":" + std::to_string(key.first) + ": cell '" + seen.first_cell + "'" +
                    (seen.others > 0 ? " and " + std::to_string(seen.others) + " other cells" : "") + ": " +
                    key.second);
  core::throw_if_problems(lines);
  if (!o.train.empty() && o.valid.empty()) throw std::invalid_argument("--train needs --valid as well");
  if (o.jobs < 1) throw std::invalid_argument("--jobs must be at least 1, not " + std::to_string(o.jobs));
}

// A finished cell, whichever shard ran it, must have run this recipe's command line.
void check_finished_cells(const Recipe& recipe, const std::vector<std::vector<std::string>>& argvs,
                          const std::string& out) {
  constexpr size_t kShown = 3;  // the others are counted: a grid's cells would make a line of megabytes
  std::vector<std::string> problems;
  size_t more = 0;
  for (size_t i = 0; i < recipe.cells.size(); ++i) {
    const std::string json = out + "/cells/" + recipe.cells[i].name + "/cell.json";
    if (!fs::exists(json)) continue;
    const auto bytes = core::read_file(json);
    const auto saved = nlohmann::json::parse(bytes.begin(), bytes.end()).at("argv").get<std::vector<std::string>>();
    if (saved != argvs[i] && problems.size() == kShown) ++more;
    else if (saved != argvs[i])
      problems.push_back("cell '" + recipe.cells[i].name + "' in " + out + " ran with another command line (" +
                         join_args(saved) + ")");
  }
  if (more > 0) problems.push_back("and " + std::to_string(more) + " other cells");
  if (!problems.empty())
    throw std::invalid_argument(core::join_problems(problems) +
                                "; use another --out for a changed recipe, scale or data");
}

// Every shard writes the same recipe.toml and run.json (nothing in them is the shard's), so
// whichever writes last leaves them as they were; the synthetic data when the recipe makes its own.
void write_bookkeeping(const Recipe& recipe, const RunOptions& o, const std::string& out, const Values& placeholders,
                       const std::vector<std::vector<std::string>>& argvs) {
  const auto lock = lock_bookkeeping(out);
  fs::create_directories(out + "/cells");
  core::write_file_atomic(out + "/recipe.toml", core::read_file(recipe.path));
  nlohmann::json run = {{"recipe", absolute(recipe.path)}, {"title", recipe.title},
                        {"scale", scale_name(o.scale)}, {"placeholders", nlohmann::json::object()},
                        {"cells", nlohmann::json::array()}};
  for (const auto& [k, v] : placeholders) run["placeholders"][k] = v;
  if (!recipe.overrides.empty()) run["overrides"] = recipe.overrides;
  for (size_t i = 0; i < recipe.cells.size(); ++i)
    run["cells"].push_back({{"name", recipe.cells[i].name}, {"argv", argvs[i]}});
  core::write_file_atomic(out + "/run.json", run.dump(1) + "\n");
  const bool own_data = o.data.empty() && o.train.empty();
  if (recipe.synth && own_data) ensure_synthetic(*recipe.synth, out + "/data");
}

// Runs this runner's pending cells, up to --jobs at once, each when the cells it reads are done.
class Scheduler {
 public:
  Scheduler(const Recipe& recipe, const RunOptions& o, std::string out, std::vector<std::vector<std::string>> argvs,
            std::vector<size_t> pending)
      : recipe_(recipe), o_(o), out_(std::move(out)), cells_dir_(out_ + "/cells"), argvs_(std::move(argvs)),
        pending_(std::move(pending)), deps_(cell_dependencies(recipe, argvs_, cells_dir_)) {
    // The runner's threads shared by the cells that run at once; a cell whose recipe options
    // set `threads` keeps its own.
    const int budget = o.threads > 0 ? o.threads : core::available_cpus();
    const size_t parallel = std::min(static_cast<size_t>(o.jobs), std::max<size_t>(pending_.size(), 1));
    cell_threads_ = std::max(1, budget / static_cast<int>(parallel));
  }
  void run() {
    while (!pending_.empty() || !running_.empty()) {
      const bool started = start_ready();
      const bool ended = reap();
      if (!started && !ended) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

 private:
  struct Running {
    size_t cell;
    std::vector<pid_t> pids;           // one per rank
    std::vector<int> codes;            // exit codes, -1 while running
    std::unique_ptr<core::DirLock> lock;
    std::chrono::steady_clock::time_point start;
    double start_time;                 // seconds since the Unix epoch
    std::vector<std::string> globals;  // what followed the cell's own command line
  };
  enum class Readiness { kReady, kWait, kMissing };

  std::string tag(size_t i) const {
    return "[" + std::to_string(i + 1) + "/" + std::to_string(recipe_.cells.size()) + "] " + recipe_.cells[i].name;
  }
  bool mine(size_t j) const {
    return std::find(pending_.begin(), pending_.end(), j) != pending_.end() ||
           std::any_of(running_.begin(), running_.end(), [&](const Running& r) { return r.cell == j; });
  }
  Readiness readiness(size_t i, std::string& missing) const;
  bool start_ready();
  bool reap();
  void start(size_t i);
  std::vector<pid_t> spawn(const Cell& cell, const std::vector<std::string>& argv, const std::string& dir) const;
  void finish(const Running& r, int code) const;

  const Recipe& recipe_;
  const RunOptions& o_;
  const std::string out_, cells_dir_;
  const std::vector<std::vector<std::string>> argvs_;
  std::vector<size_t> pending_;  // this runner's cells not started yet, in recipe order
  const std::vector<std::vector<size_t>> deps_;
  int cell_threads_ = 1;
  std::vector<Running> running_;
};

// Whether cell i can start now, must wait, or waits in vain for the cell `missing` that nobody
// runs. The lock is looked at before cell.json: a runner writes cell.json before it lets go of
// the lock, so a free lock and no cell.json mean nobody is running that cell.
Scheduler::Readiness Scheduler::readiness(size_t i, std::string& missing) const {
  for (size_t j : deps_[i]) {
    if (mine(j)) return Readiness::kWait;
    std::string why;
    if (!try_lock_cell(out_, recipe_.cells[j].name, why)) return Readiness::kWait;
    if (read_cell(cells_dir_, recipe_.cells[j].name).status == "not run") {
      missing = recipe_.cells[j].name;
      return Readiness::kMissing;
    }
  }
  return Readiness::kReady;
}

// Starts (or skips) every pending cell that can go now; true when any left the queue.
bool Scheduler::start_ready() {
  bool changed = false;
  for (auto it = pending_.begin(); it != pending_.end() && running_.size() < static_cast<size_t>(o_.jobs);) {
    const size_t i = *it;
    std::string missing;
    const Readiness ready = readiness(i, missing);
    if (ready == Readiness::kWait) {
      ++it;
      continue;
    }
    it = pending_.erase(it);
    changed = true;
    if (ready == Readiness::kReady)
      start(i);
    else
      std::cerr << "run: " << tag(i) << ": needs cell " << missing << ", which has not run, skipped"
                << " (run again once it has)\n";
  }
  return changed;
}

// Records every cell whose processes have all ended; true when any did.
bool Scheduler::reap() {
  bool changed = false;
  for (auto it = running_.begin(); it != running_.end();) {
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
    it = running_.erase(it);  // lets go of the cell's lock, after its cell.json
    changed = true;
  }
  return changed;
}

void Scheduler::start(size_t i) {
  const Cell& cell = recipe_.cells[i];
  const std::string dir = cells_dir_ + "/" + cell.name;
  std::string why;
  auto lock = try_lock_cell(out_, cell.name, why);
  if (!lock) {
    std::cerr << "run: " << tag(i) << ": another runner has it, skipped (" << why << ")\n";
    return;
  }
  const CellResult before = read_cell(cells_dir_, cell.name);
  if (before.status != "not run" && !(o_.retry_failed && before.status == "failed")) {
    std::cerr << "run: " << tag(i) << ": " << before.status << " before, skipped\n";
    return;
  }
  fs::create_directories(dir);
  std::vector<std::string> globals;
  const bool own_threads = std::any_of(cell.options.begin(), cell.options.end(),
                                       [](const CellOption& opt) { return opt.key == "threads"; });
  // A cell of several ranks shares its threads between them (as torchrun's OMP_NUM_THREADS).
  if (!own_threads) globals = {"--threads", std::to_string(std::max(1, cell_threads_ / static_cast<int>(cell.ranks)))};
  globals.insert(globals.end(), o_.cell_globals.begin(), o_.cell_globals.end());
  std::vector<std::string> argv = {o_.executable};
  argv.insert(argv.end(), argvs_[i].begin(), argvs_[i].end());
  argv.insert(argv.end(), globals.begin(), globals.end());
  std::cerr << "run: " << tag(i) << ": " << join_args(argvs_[i]) << "\n";
  const double start_time = unix_time();
  const auto t0 = std::chrono::steady_clock::now();
  auto pids = spawn(cell, argv, dir);
  running_.push_back({i, pids, std::vector<int>(pids.size(), -1), std::move(lock), t0, start_time, globals});
}

// One process, or torchrun --standalone's environment for each rank (docs/distributed.md);
// rank 0 logs to cell.log, rank r to cell.rank<r>.log.
std::vector<pid_t> Scheduler::spawn(const Cell& cell, const std::vector<std::string>& argv,
                                    const std::string& dir) const {
  const int ranks = static_cast<int>(cell.ranks);
  if (ranks == 1) return {start_process(argv, dir, dir + "/cell.log")};
  std::vector<pid_t> pids;
  const std::string port = free_port(), world = std::to_string(ranks);
  for (int r = 0; r < ranks; ++r) {
    const std::vector<std::pair<std::string, std::string>> env = {
        {"RANK", std::to_string(r)}, {"LOCAL_RANK", std::to_string(r)}, {"WORLD_SIZE", world},
        {"LOCAL_WORLD_SIZE", world}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}};
    pids.push_back(
        start_process(argv, dir, dir + (r == 0 ? "/cell.log" : "/cell.rank" + std::to_string(r) + ".log"), env));
  }
  return pids;
}

void Scheduler::finish(const Running& r, int code) const {
  const Cell& cell = recipe_.cells[r.cell];
  const std::string dir = cells_dir_ + "/" + cell.name;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - r.start).count();
  bool diverged = code == 3;
  if (code == 0)
    for (const auto& m : read_metrics(dir + "/metrics.jsonl")) diverged = diverged || m.diverged;
  const std::string status = diverged ? "diverged" : code == 0 ? "ok" : "failed";
  nlohmann::json grid = nlohmann::json::object();
  for (const auto& [k, v] : cell.grid) grid[k] = v;
  const nlohmann::json record = {{"name", cell.name}, {"command", cell.command}, {"argv", argvs_[r.cell]},
                                 {"globals", r.globals}, {"grid", grid}, {"ranks", cell.ranks}, {"exit_code", code},
                                 {"status", status}, {"wall_s", wall}, {"start_time", r.start_time},
                                 {"end_time", unix_time()}};
  core::write_file_atomic(dir + "/cell.json", record.dump(1) + "\n");
  std::cerr << "run: " << tag(r.cell) << ": " << status << " (exit " << code << ", " << format_number(wall) << " s)"
            << (status == "failed" ? ", see " + dir + "/cell.log" : "") << "\n";
}

// Every cell as found in DIR, whichever runner ran it, read under the bookkeeping lock: a
// runner writes its last cell.json before it takes the lock, so the last summary.csv written
// describes every finished cell.
std::vector<CellResult> collect_results(const Recipe& recipe, const std::string& out) {
  std::vector<CellResult> results;
  const auto lock = lock_bookkeeping(out);
  for (const auto& cell : recipe.cells) {
    results.push_back(read_cell(out + "/cells", cell.name));
    if (results.back().status == "not run") {  // no cell.json: its row says what it will run
      results.back().command = cell.command;
      results.back().grid = cell.grid;
    }
  }
  core::write_file_atomic(out + "/summary.csv", summary_csv(results));
  return results;
}

void print_summary(const std::vector<CellResult>& results, const std::string& out) {
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
}

// Whether --cells' globs (none: every cell) select the cell `name`.
bool selected(const std::vector<std::string>& globs, const std::string& name) {
  return globs.empty() || std::any_of(globs.begin(), globs.end(), [&](const std::string& g) {
           return ::fnmatch(g.c_str(), name.c_str(), 0) == 0;
         });
}

// Every --cells glob must select a cell of the recipe (a typo would silently run nothing).
void check_globs(const Recipe& recipe, const std::vector<std::string>& globs) {
  std::vector<std::string> problems;
  for (const auto& g : globs)
    if (std::none_of(recipe.cells.begin(), recipe.cells.end(),
                     [&](const Cell& c) { return selected({g}, c.name); }))
      problems.push_back("--cells '" + g + "' matches no cell of " + recipe.path);
  core::throw_if_problems(problems);
}

}  // namespace

std::vector<CellResult> run_recipe(const Recipe& recipe, const RunOptions& o, const OptionChecker& check) {
  check_cells(recipe, o, check);
  check_globs(recipe, o.only);
  const std::string out = absolute(o.out);
  const Values placeholders = data_placeholders(recipe, o);
  std::vector<std::vector<std::string>> argvs;
  for (const auto& cell : recipe.cells)
    argvs.push_back(cell_arguments(recipe, cell, placeholders, out + "/cells/" + cell.name,
                                   check(cell.command, "out").empty()));
  std::vector<size_t> pending;  // this runner's share, in recipe order
  for (size_t i = 0; i < recipe.cells.size(); ++i)
    if (static_cast<int>(i % o.shard.count) == o.shard.index - 1 && selected(o.only, recipe.cells[i].name))
      pending.push_back(i);
  if (o.dry_run) {
    for (size_t i : pending) std::cout << recipe.cells[i].name << "\t" << join_args(argvs[i]) << "\n";
    return {};
  }
  check_finished_cells(recipe, argvs, out);
  write_bookkeeping(recipe, o, out, placeholders, argvs);
  Scheduler(recipe, o, out, argvs, std::move(pending)).run();
  auto results = collect_results(recipe, out);
  print_summary(results, out);
  return results;
}

}  // namespace normlab::recipe
