// `normlab lm-tasks`: next-line (pair) and word-order (single-sentence) classification tasks from
// the held-out text of an `normlab lm-data` folder, for fine-tuning a pre-trained LM (data/lm_tasks.h;
// docs/data.md, "Downstream tasks").
#include <iostream>
#include <memory>

#include "commands.h"
#include "data/lm_tasks.h"

namespace normlab::app {

Runner add_lm_tasks_command(CLI::App& app, const GlobalOptions& /*global*/) {
  auto* cmd = app.add_subcommand("lm-tasks", "build classification tasks from an lm-data folder's valid/test text");
  struct Options {
    std::string data, out;
    data::LmTaskOptions tasks;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("--data", o->data, "an `normlab lm-data` output folder (manifest.json, valid.txt, test.txt)")
      ->required();
  cmd->add_option("--out", o->out, "folder for next-line/, word-order/ ({train,dev}.tsv) and manifest.json")
      ->required();
  cmd->add_option("--seed", o->tasks.seed, "seed of every random decision")->capture_default_str();
  cmd->add_option("--min-words", o->tasks.min_words, "a unit (line) has at least this many words")
      ->capture_default_str();
  cmd->add_option("--max-words", o->tasks.max_words, "and at most this many")->capture_default_str();
  cmd->add_option("--max-examples", o->tasks.max_examples, "keep a seeded sample of N examples of each file, in file order (0: all)")
      ->capture_default_str();
  return [o] {
    const auto reports = data::write_lm_tasks(o->data, o->out, o->tasks);
    std::cerr << "lm-tasks:";
    for (const auto& r : reports)
      std::cerr << " " << r.task << "/" << r.file << " " << r.examples << " (label 1: " << r.labels.at(1) << ")"
                << (&r == &reports.back() ? "" : ";");
    std::cerr << " in " << o->out << "\n";
  };
}

}  // namespace normlab::app
