// Ranks of one job must run the same computation: what each resolved (options, data
// fingerprints, resume position) is compared with rank 0's through the process group.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "core/process_group.h"

namespace normlab::core {

// Throws std::invalid_argument on every rank when some rank's `job` differs from rank 0's,
// naming the rank and the first differing JSON path with both values.
void check_same_job(const nlohmann::json& job, ProcessGroup& group);

}  // namespace normlab::core
