// `normlab report`: figures, tables and claim verdicts from what recipe runs measured
// (docs/report.md). Every figure kind is drawn only when its files exist:
//
//   metrics.jsonl                 validation loss (and BLEU) against epoch, training loss against update
//   grad_norms.csv, hidden_norms.csv   gradient norm / hidden-state norm (with Lemma 2's bounds) against layer
//   sweep.csv + sweep.json        Theorem 1: last FFN weight's gradient against depth and width, log-log, slopes
//   trace/histograms.csv          gradient and update histograms over steps (heat maps)
//   trace/ln_inputs.csv           LayerNorm input norms per layer over steps
//   perturb.csv                   output change against depth
//   density.csv + hessian.json    Hessian spectral density, log scale, lambda_max marked
//   per_block.csv                 lambda_max of each layer's Hessian block against layer, and a table
//   evaluate.json                 a table of test BLEU, chrF and loss
//
// OUT/REPORT.md, OUT/report.json (the same verdicts and tables, for programs) and
// OUT/figures/NAME.{png,svg,dat,gp}.
#pragma once

#include <string>
#include <vector>

namespace normlab::report {

struct ReportOptions {
  std::vector<std::string> dirs;  // `normlab run` output folders, or single result folders
  std::string out;                // empty: DIRS[0]/report
};

struct ReportSummary {
  std::string report_md;                   // OUT/REPORT.md
  std::vector<std::string> figures;        // PNG paths
  std::vector<std::string> verdict_lines;  // "reproduced: CLAIM -- REASON", one per claim
};

// Throws std::invalid_argument for a folder that is neither a run folder nor holds results.
ReportSummary write_report(const ReportOptions& options);

}  // namespace normlab::report
