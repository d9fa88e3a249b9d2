#include "train/checkpoint_names.h"

#include <algorithm>
#include <filesystem>
#include <regex>
#include <stdexcept>

namespace normlab::train {

namespace fs = std::filesystem;

std::string epoch_checkpoint_name(int64_t epoch) { return "checkpoint" + std::to_string(epoch) + ".pt"; }

std::string update_checkpoint_name(int64_t epoch, int64_t update) {
  return "checkpoint_" + std::to_string(epoch) + "_" + std::to_string(update) + ".pt";
}

std::optional<int64_t> numbered_checkpoint(const std::string& filename, bool by_update) {
  static const std::regex epoch_name(R"(checkpoint(\d+)\.pt)"), update_name(R"(checkpoint_\d+_(\d+)\.pt)");
  std::smatch m;
  if (!std::regex_match(filename, m, by_update ? update_name : epoch_name)) return std::nullopt;
  return std::stoll(m[1].str());
}

std::vector<std::string> last_checkpoints(const std::string& dir, int count, bool by_update, int64_t upper_bound) {
  if (count < 1) throw std::invalid_argument("the number of checkpoints to average must be at least 1");
  if (!fs::is_directory(dir)) throw std::invalid_argument(dir + ": not a folder of checkpoints");
  std::vector<std::pair<int64_t, std::string>> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const auto key = numbered_checkpoint(entry.path().filename().string(), by_update);
    if (key && (upper_bound <= 0 || *key <= upper_bound)) found.emplace_back(*key, entry.path().string());
  }
  if (static_cast<int>(found.size()) < count)
    throw std::invalid_argument(dir + ": " + std::to_string(count) + " " + (by_update ? "update" : "epoch") +
                                " checkpoints asked for, " + std::to_string(found.size()) + " found" +
                                (upper_bound > 0 ? " at or below " + std::to_string(upper_bound) : ""));
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) out.push_back(found[i].second);
  return out;
}

std::string update_checkpoint_path(const std::string& dir, int64_t update) {
  if (!fs::is_directory(dir)) throw std::invalid_argument(dir + ": not a folder of checkpoints");
  std::vector<int64_t> updates;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const auto name = entry.path().filename().string();
    const auto key = numbered_checkpoint(name, /*by_update=*/true);
    if (key && *key == update) return entry.path().string();
    if (key) updates.push_back(*key);
  }
  std::sort(updates.begin(), updates.end());
  std::string have;
  for (auto u : updates) have += (have.empty() ? "" : ", ") + std::to_string(u);
  throw std::invalid_argument(dir + ": no checkpoint of update " + std::to_string(update) + " (checkpoint_<E>_" +
                              std::to_string(update) + ".pt; " +
                              (have.empty() ? std::string("it has none; train with --save-interval-updates")
                                            : "it has updates " + have) +
                              ")");
}

}  // namespace normlab::train
