// Checkpoint averaging, as fairseq's scripts/average_checkpoints.py (docs/translate.md).
#pragma once

#include <string>
#include <vector>

namespace normlab::model {

// Writes to `out` (atomically) a checkpoint whose every parameter is the mean of the inputs':
// summed in the inputs' order in their own dtype (fp32), then divided by their number, as
// fairseq does. It keeps the first input's training configuration and vocabulary, records the
// inputs under "averaged_from", and holds no training position or optimiser state: it decodes,
// scores and seeds --init-from, and is not a run to resume. Throws std::invalid_argument when
// the inputs differ in model configuration or vocabulary (naming both files).
void average_checkpoints(const std::vector<std::string>& inputs, const std::string& out);

}  // namespace normlab::model
