// One function per subcommand: adds it to the CLI11 app with its options and returns the
// function that runs it once the command line is parsed.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace normlab::app {

// Options every subcommand shares, read once in main before the subcommand runs.
struct GlobalOptions {
  int threads = 0;             // 0: one per CPU this process may use
  std::string device = "auto"; // cpu | cuda | cuda:N | auto
};

using Runner = std::function<void()>;

// Thrown by a runner to end with `code` and a one-line `message` (e.g. 3 for a diverged run
// under --fail-on-divergence); other exceptions end with code 2.
struct ExitCode {
  int code;
  std::string message;
};

Runner add_info_command(CLI::App& app, const GlobalOptions& global);
Runner add_init_command(CLI::App& app, const GlobalOptions& global);
Runner add_export_command(CLI::App& app, const GlobalOptions& global);
Runner add_average_command(CLI::App& app, const GlobalOptions& global);
Runner add_score_command(CLI::App& app, const GlobalOptions& global);
Runner add_bpe_command(CLI::App& app, const GlobalOptions& global);
Runner add_train_command(CLI::App& app, const GlobalOptions& global);
Runner add_finetune_command(CLI::App& app, const GlobalOptions& global);
Runner add_bleu_command(CLI::App& app, const GlobalOptions& global);
Runner add_probe_command(CLI::App& app, const GlobalOptions& global);
Runner add_advise_command(CLI::App& app, const GlobalOptions& global);
Runner add_perturb_command(CLI::App& app, const GlobalOptions& global);
Runner add_coord_check_command(CLI::App& app, const GlobalOptions& global);
Runner add_translate_command(CLI::App& app, const GlobalOptions& global);
Runner add_evaluate_command(CLI::App& app, const GlobalOptions& global);
Runner add_hessian_command(CLI::App& app, const GlobalOptions& global);
Runner add_synth_command(CLI::App& app, const GlobalOptions& global);
Runner add_run_command(CLI::App& app, const GlobalOptions& global);
Runner add_report_command(CLI::App& app, const GlobalOptions& global);
Runner add_lm_data_command(CLI::App& app, const GlobalOptions& global);
Runner add_lm_tasks_command(CLI::App& app, const GlobalOptions& global);
Runner add_eval_lm_command(CLI::App& app, const GlobalOptions& global);
Runner add_generate_command(CLI::App& app, const GlobalOptions& global);

// `normlab advise --warmup-gate G ...` stands for `normlab train ... --warmup-gate G
// --warmup-gate-only` (issue 37 §1: the advice from the first 2% of training, given the run's
// own options; docs/warmup.md). The arguments to parse: argv's, or the train command they stand for.
std::vector<std::string> advise_from_probe(int argc, char** argv);

}  // namespace normlab::app
