#include "core/same_job.h"

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace normlab::core {

void check_same_job(const nlohmann::json& job, ProcessGroup& group) {
  if (group.size() == 1) return;
  const auto all = group.all_gather(job.dump());
  const auto ref = nlohmann::json::parse(all[0]);
  for (size_t r = 1; r < all.size(); ++r) {
    const auto other = nlohmann::json::parse(all[r]);
    if (other == ref) continue;
    const std::string path = nlohmann::json::diff(ref, other).front().at("path");
    const nlohmann::json::json_pointer at(path);
    auto value = [&](const nlohmann::json& j) { return j.contains(at) ? j.at(at).dump() : std::string("absent"); };
    throw std::invalid_argument("rank " + std::to_string(r) + " runs another job than rank 0: " + path + " is " +
                                value(ref) + " on rank 0 but " + value(other) + " on rank " + std::to_string(r) +
                                " (every rank needs the same options and data files, and must see the output "
                                "folder: a file system they share)");
  }
}

}  // namespace normlab::core
