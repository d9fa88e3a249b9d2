// `normlab report`: figures, tables and claim verdicts of recipe runs (src/report; docs/report.md).
#include <iostream>
#include <memory>

#include "commands.h"
#include "report/report.h"

namespace normlab::app {

Runner add_report_command(CLI::App& app, const GlobalOptions& /*global*/) {
  auto* cmd = app.add_subcommand("report", "REPORT.md with figures (gnuplot PNG/SVG), tables and claim verdicts");
  auto o = std::make_shared<report::ReportOptions>();
  cmd->add_option("dirs", o->dirs, "`normlab run` output folders (or single result folders)")->required();
  cmd->add_option("--out", o->out, "report folder (default: DIR/report of the first folder)");
  return [o] {
    const auto summary = report::write_report(*o);
    std::cerr << "report: " << summary.report_md << " (" << summary.figures.size() << " figures)\n";
    for (const auto& line : summary.verdict_lines) std::cerr << "  " << line << "\n";
  };
}

}  // namespace normlab::app
