// normlab: one binary, one subcommand per job. Errors become one line on stderr and exit 2.
#include <algorithm>
#include <csignal>
#include <exception>
#include <iostream>
#include <map>
#include <vector>

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

#include "commands.h"
#include "core/launch_env.h"
#include "core/runtime.h"
#include "omp_wait.h"
#include "option_cli.h"

namespace {

// --threads, else the CPUs shared among the processes a launcher started on this machine
// (torchrun's LOCAL_WORLD_SIZE); 0 leaves the choice to configure_threads.
int default_threads(int requested) {
  if (requested > 0) return requested;
  try {
    const auto env = normlab::core::read_launch_env();
    if (env && env->local_world_size > 1)
      return std::max(1, normlab::core::available_cpus() / env->local_world_size);
  } catch (const std::invalid_argument&) {
    // a malformed launch is reported by the command that joins the job
  }
  return 0;
}

int fail(const std::string& message) {
  std::cerr << "normlab: error: " << message << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace normlab;
  // A peer that went away is an error to report, not a signal that kills this rank without a
  // word (Python ignores SIGPIPE the same way): writes to its socket fail with EPIPE instead.
  std::signal(SIGPIPE, SIG_IGN);
  // Failed enforcements (a failed allocation among them) throw c10::Error, reported in one line
  // below, instead of aborting the process (LibTorch's C++ default is to abort).
  FLAGS_caffe2_use_fatal_for_enforce = false;
  CLI::App app{"normlab: Transformer normalisation schemes, trained and looked inside"};
  app.require_subcommand(1);
  app.fallthrough();  // global options may follow the subcommand
  app::GlobalOptions global;
  app.add_option("--threads", global.threads, "intra-op CPU threads (0: one per available CPU)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--device", global.device, "cpu, cuda, cuda:N or auto (cuda when available)");

  std::map<const CLI::App*, app::Runner> runners;
  auto add = [&](app::Runner (*adder)(CLI::App&, const app::GlobalOptions&)) {
    auto runner = adder(app, global);
    runners[app.get_subcommands([](CLI::App*) { return true; }).back()] = std::move(runner);
  };
  add(app::add_info_command);
  add(app::add_init_command);
  add(app::add_export_command);
  add(app::add_average_command);
  add(app::add_score_command);
  add(app::add_bpe_command);
  add(app::add_train_command);
  add(app::add_finetune_command);
  add(app::add_bleu_command);
  add(app::add_probe_command);
  add(app::add_advise_command);
  add(app::add_perturb_command);
  add(app::add_coord_check_command);
  add(app::add_translate_command);
  add(app::add_evaluate_command);
  add(app::add_eval_lm_command);
  add(app::add_generate_command);
  add(app::add_hessian_command);
  add(app::add_synth_command);
  add(app::add_run_command);
  add(app::add_report_command);
  add(app::add_lm_data_command);
  add(app::add_lm_tasks_command);
  app::refuse_empty_numbers(app);

  auto args = app::advise_from_probe(argc, argv);
  std::vector<char*> arg_ptrs;
  for (auto& a : args) arg_ptrs.push_back(a.data());
  arg_ptrs.push_back(nullptr);
  try {
    app.parse(static_cast<int>(args.size()), arg_ptrs.data());
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(e.what());
  }
  // Training on several threads of a busy machine restarts once to spin less (omp_wait.h); one
  // thread has no barrier to spin at.
  const std::string command = app.get_subcommands().front()->get_name();
  const int threads = default_threads(global.threads);
  if ((command == "train" || command == "finetune") && (threads == 0 ? core::available_cpus() : threads) > 1)
    app::spin_less_when_busy(arg_ptrs.data());
  try {
    core::configure_memory();
    core::configure_threads(default_threads(global.threads));
    runners.at(app.get_subcommands().front())();
  } catch (const app::ExitCode& e) {
    std::cerr << "normlab: " << e.message << "\n";
    return e.code;
  } catch (const c10::Error& e) {
    return fail(e.what_without_backtrace());
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  return 0;
}
