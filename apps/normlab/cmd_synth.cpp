// `normlab synth`: writes the built-in synthetic translation task (data/synthetic.h;
// docs/synthetic.md) as text files.
#include <iostream>
#include <memory>

#include "commands.h"
#include "data/synthetic.h"

namespace normlab::app {

Runner add_synth_command(CLI::App& app, const GlobalOptions& /*global*/) {
  auto* cmd = app.add_subcommand("synth", "write the synthetic translation task (src -> tgt) to DIR");
  struct Options {
    data::SyntheticConfig config;
    std::string out;
  };
  auto o = std::make_shared<Options>();
  auto& c = o->config;
  cmd->add_option("--out", o->out, "folder for {train,valid,test}.{src,tgt}, grammar.json, README.md")
      ->required();
  cmd->add_option("--seed", c.seed, "seed of the lexicon and the sentences")->capture_default_str();
  cmd->add_option("--train", c.train, "training pairs")->capture_default_str();
  cmd->add_option("--valid", c.valid, "validation pairs")->capture_default_str();
  cmd->add_option("--test", c.test, "test pairs")->capture_default_str();
  const std::string lex = "Lexicon and lengths";
  cmd->add_option("--nouns", c.nouns, "nouns")->capture_default_str()->group(lex);
  cmd->add_option("--adjectives", c.adjectives, "adjectives")->capture_default_str()->group(lex);
  cmd->add_option("--transitive-verbs", c.transitive_verbs, "transitive verbs")->capture_default_str()->group(lex);
  cmd->add_option("--intransitive-verbs", c.intransitive_verbs, "intransitive verbs")
      ->capture_default_str()->group(lex);
  cmd->add_option("--prepositions", c.prepositions, "prepositions")->capture_default_str()->group(lex);
  cmd->add_option("--min-length", c.min_length, "fewest source words")->capture_default_str()->group(lex);
  cmd->add_option("--max-length", c.max_length, "most source words")->capture_default_str()->group(lex);
  return [o] {
    const auto task = data::generate_synthetic_task(o->config);
    data::write_synthetic_task(task, o->out);
    std::cerr << "synth: " << task.train.src.size() << "/" << task.valid.src.size() << "/"
              << task.test.src.size() << " train/valid/test pairs in " << o->out
              << " (languages src, tgt)\n";
  };
}

}  // namespace normlab::app
