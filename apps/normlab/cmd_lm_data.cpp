// `normlab lm-data`: the English language-model corpora (Shakespeare, Milton, Wikipedia) cleaned
// and split by work into OUT/{train,valid,test}.txt with OUT/manifest.json (data/lm_corpus.h;
// docs/data.md, "English text for language models").
#include <iostream>
#include <memory>
#include <sstream>

#include "commands.h"
#include "data/lm_corpus.h"

namespace normlab::app {

Runner add_lm_data_command(CLI::App& app, const GlobalOptions& /*global*/) {
  auto* cmd = app.add_subcommand("lm-data", "clean and split English text for language models into OUT");
  struct Options {
    std::string data, out, sources = "shakespeare,milton,wikipedia";
    data::LmSplitConfig split;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("--data", o->data, "folder with shakespeare/, milton/, wikipedia/ (../shared/data/lm)")
      ->required();
  cmd->add_option("--out", o->out, "folder for train.txt, valid.txt, test.txt, manifest.json")->required();
  cmd->add_option("--sources", o->sources, "comma-separated: shakespeare, milton, wikipedia")
      ->capture_default_str();
  cmd->add_option("--valid-fraction", o->split.valid_fraction, "share of each source's words aimed at for valid")
      ->capture_default_str();
  cmd->add_option("--test-fraction", o->split.test_fraction, "share of each source's words aimed at for test")
      ->capture_default_str();
  return [o] {
    o->split.validate();
    std::vector<std::string> sources;
    std::stringstream ss(o->sources);
    for (std::string s; std::getline(ss, s, ',');) sources.push_back(s);
    const auto corpus = data::read_lm_corpus(o->data, sources);
    const auto split = data::split_lm_groups(corpus, o->split);
    data::write_lm_data(corpus, split, o->split, o->out);
    int64_t words[3] = {0, 0, 0};
    for (const auto& d : corpus.documents) words[static_cast<int>(split.at(d.group))] += d.words;
    std::cerr << "lm-data: " << corpus.documents.size() << " documents; words train/valid/test "
              << words[0] << "/" << words[1] << "/" << words[2] << " in " << o->out << "\n";
  };
}

}  // namespace normlab::app
