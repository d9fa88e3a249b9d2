#include "input_options.h"

namespace normlab::app {

void add_input_options(CLI::App& cmd, analysis::InputConfig& in) {
  const std::string g = "Inputs";
  cmd.add_option("--train", in.train_prefix,
                 "corpus PREFIX for real mini-batches (a decoder-only or encoder-only model's: a text FILE; "
                 "else random tokens)")->group(g);
  cmd.add_option("--vocab", in.vocab_path, "SentencePiece model (spm.model); without it one is trained")->group(g);
  cmd.add_option("--vocab-size", in.vocab_size, "pieces to train, or the random tokens' vocabulary")
      ->capture_default_str()->group(g);
  cmd.add_option("--src", in.src_lang, "source language suffix")->capture_default_str()->group(g);
  cmd.add_option("--tgt", in.tgt_lang, "target language suffix")->capture_default_str()->group(g);
  cmd.add_option("--cache-dir", in.cache_dir, "encoded-corpus cache folder (default: none)")->group(g);
  cmd.add_option("--max-tokens", in.batching.max_tokens, "padded tokens per real batch")
      ->capture_default_str()->group(g);
  cmd.add_option("--block-size", in.block_size, "--train FILE of a single-stack model: positions per block "
                 "(0: --max-positions, as train)")->capture_default_str()->group(g);
  cmd.add_option("--sentences", in.sentences, "random/Gaussian inputs: sentences per batch")
      ->capture_default_str()->group(g);
  cmd.add_option("--length", in.length, "random/Gaussian inputs: tokens per sentence (a single-stack model's: "
                 "positions per block)")
      ->capture_default_str()->group(g);
}

}  // namespace normlab::app
