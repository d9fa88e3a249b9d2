#include "train/run_dir.h"

#include <algorithm>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "train/checkpoint_names.h"
#include "train/position.h"

namespace normlab::train {
namespace fs = std::filesystem;

RunDir::RunDir(const std::string& dir, bool writes) : dir_(dir), writes_(writes) {
  if (!writes_) return;
  lock_.emplace(dir, "normlab train");
  fs::create_directories(checkpoints());
  // A writer killed mid-save leaves NAME.pt.tmp.PID (core::write_file_atomic's temporary file);
  // holding the lock, this process is the only writer alive, so they are leftovers.
  for (const auto& e : fs::directory_iterator(checkpoints()))
    if (e.path().filename().string().find(".pt.tmp.") != std::string::npos) fs::remove(e.path());
  log_.open(dir_ / "train.log", std::ios::app);
  std::ofstream(dir_ / "metrics.jsonl", std::ios::app);  // the run folder always has it, even before a record
}

void RunDir::line(const std::string& text) {
  if (!writes_) return;
  std::cerr << text << "\n";
  log_ << text << "\n";
  log_.flush();
}

void RunDir::record(const nlohmann::json& j) {
  if (!writes_) return;
  const auto file = dir_ / "metrics.jsonl";
  std::ofstream out(file, std::ios::app);
  out << j.dump() << "\n";
  if (!out.flush()) throw std::runtime_error("cannot append to " + file.string());
}

void keep_records(const fs::path& file, const std::function<bool(const nlohmann::json&)>& keep) {
  if (!fs::exists(file)) return;
  std::ifstream in(file);
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && keep(j)) kept += line + "\n";
  }
  core::write_file_atomic(file.string(), kept);
}

void RunDir::cut_records(int64_t update, int64_t epoch) const {
  if (!writes_) return;
  keep_records(dir_ / "metrics.jsonl", [&](const nlohmann::json& j) {
    if (j.value("step", int64_t{0}) > update) return false;
    return !(j.contains("valid_loss") && !j.value("mid_epoch", false) && j.value("epoch", int64_t{0}) >= epoch);
  });
}

void RunDir::write_config(const nlohmann::json& config) const {
  if (writes_) core::write_file_atomic((dir_ / "config.json").string(), config.dump(2) + "\n");
}

std::optional<model::LoadedModel> RunDir::newest_checkpoint(int64_t before_update) {
  const auto dir = checkpoints();
  if (!fs::exists(dir)) return std::nullopt;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".pt") files.push_back(e.path());
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    const bool a_last = a.filename() == "checkpoint_last.pt", b_last = b.filename() == "checkpoint_last.pt";
    if (a_last != b_last) return a_last;
    return fs::last_write_time(a) > fs::last_write_time(b);
  });
  for (const auto& f : files) {
    if (f.filename() == "checkpoint_best.pt") continue;  // not necessarily the newest position
    try {
      auto loaded = model::load_model(f.string());
      if (!loaded.meta.contains("position")) continue;
      if (before_update >= 0 && position_from_json(loaded.meta.at("position")).update >= before_update) continue;
      if (before_update < 0 && f.filename() != "checkpoint_last.pt" && fs::exists(dir / "checkpoint_last.pt"))
        line("normlab train: " + (dir / "checkpoint_last.pt").string() + " is unreadable; resuming from " + f.string());
      return loaded;
    } catch (const std::exception& e) {
      line(std::string("normlab train: skipping checkpoint: ") + e.what());
    }
  }
  return std::nullopt;
}

bool RunDir::validated(int64_t update) const {
  std::ifstream in(dir_ / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("valid_loss") && j.value("step", int64_t{-1}) == update) return true;
  }
  return false;
}

void RunDir::save(const std::vector<std::string>& names, const model::Model& net, const nlohmann::json& meta,
                  const model::TensorMap& extra) const {
  if (!writes_) return;
  for (const auto& name : names) model::save_model((checkpoints() / name).string(), net, meta, extra);
}

void RunDir::prune(int64_t keep) const {
  if (keep <= 0 || !writes_) return;
  std::vector<fs::path> numbered;
  for (const auto& e : fs::directory_iterator(checkpoints())) {
    const auto n = e.path().filename().string();
    // Only the numbered checkpoints training wrote: never an average or a file of the user's.
    if (numbered_checkpoint(n, false) || numbered_checkpoint(n, true)) numbered.push_back(e.path());
  }
  std::sort(numbered.begin(), numbered.end(),
            [](const fs::path& a, const fs::path& b) { return fs::last_write_time(a) > fs::last_write_time(b); });
  for (size_t i = static_cast<size_t>(keep); i < numbered.size(); ++i) fs::remove(numbered[i]);
}

}  // namespace normlab::train
