// What a recipe run left behind, read back for the summary, the claims and the report:
// DIR/cells/NAME/cell.json (written by the runner) and, for train cells, metrics.jsonl.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace normlab::recipe {

struct CellResult {
  std::string name, dir;       // dir: DIR/cells/NAME
  std::string status;          // ok | failed | diverged | not run
  std::string command;         // normlab subcommand
  std::string precision = "fp32";  // its --precision (precision.md), "fp32" when not given; "auto: bf16" as resolved
  int exit_code = -1;
  double wall_s = 0;
  std::vector<std::pair<std::string, std::string>> grid;  // the cell's grid point
};

// One record of a run folder's metrics.jsonl (docs/training.md); absent fields are NaN.
struct MetricsRecord {
  int64_t step = 0, epoch = 0;
  double loss, grad_norm, lr;                     // training records
  double valid_loss, valid_nll, valid_bleu;       // validation records
  double valid_accuracy;                          // a classifier's validation records
  double test_loss;                               // the final test record (train --test)
  double init_valid_loss;                         // the initial model's (train --valid-at-init)
  bool validation = false, diverged = false;      // kind of record
};

// Every record of `path` (a missing file gives none); a malformed line throws
// std::runtime_error "FILE:LINE: ...".
std::vector<MetricsRecord> read_metrics(const std::string& path);

// DIR/cells/NAME/cell.json as written by the runner, or status "not run" when absent.
CellResult read_cell(const std::string& cells_dir, const std::string& name);

// The named scalar measurements of a cell (docs/recipes.md#metrics): final_valid_loss,
// best_valid_loss, final_valid_bleu, best_valid_bleu, final_valid_accuracy, best_valid_accuracy,
// final_valid_ppl, final_loss, test_loss, epochs, steps, wall_s; a diverged cell's final losses
// are +inf and its final BLEU and accuracy 0. Absent when
// the cell did not measure it.
std::map<std::string, double> cell_metrics(const CellResult& cell);

// A CSV file with a header line and plain comma-separated fields (the result files of
// docs/recipes.md#files; no quoting).
struct CsvTable {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  int column(const std::string& name) const;  // index, or -1
};

// Throws std::runtime_error "FILE:LINE: ..." for a row whose field count differs from the header.
CsvTable read_csv(const std::string& path);
// read_csv, or for a FILE.jsonl (one JSON object a line, e.g. curvature.jsonl) the same table:
// a column per scalar key in the order first seen, numbers as %.17g, null or absent as "";
// nested values are left out. Throws std::runtime_error "FILE:LINE: ..." for a line that is
// not a JSON object.
CsvTable read_table(const std::string& path);

}  // namespace normlab::recipe
