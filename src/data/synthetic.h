// The built-in synthetic translation task (docs/synthetic.md): an artificial language pair
// generated from a seed, no downloads. The source is English-like (SVO, adjectives before
// the noun, plural -s, verb -s after a singular subject); the target has grammatical gender,
// articles and adjectives agreeing with their noun, adjectives after the noun in mirrored
// order, verbs agreeing with their subject, and verb-final subordinate clauses. Every source
// word has exactly one target word, so a model must learn order and agreement by attending.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace normlab::data {

struct SyntheticConfig {
  uint64_t seed = 1;             // everything (lexicon, sentences) follows from it
  int64_t train = 20000;         // sentence pairs per split
  int64_t valid = 500;
  int64_t test = 500;
  int64_t nouns = 300;           // lexicon sizes (each a distinct generated pseudo-word per side)
  int64_t adjectives = 100;
  int64_t transitive_verbs = 80;
  int64_t intransitive_verbs = 40;
  int64_t prepositions = 12;
  int64_t min_length = 3;        // source words per sentence, inclusive
  int64_t max_length = 30;

  // Every problem at once, naming the option.
  std::vector<std::string> problems() const;
};

struct SyntheticSplit {
  std::vector<std::string> src, tgt;  // line-aligned sentence pairs
};

struct SyntheticTask {
  nlohmann::json grammar;  // the rules, function words and the whole lexicon (grammar.json)
  SyntheticSplit train, valid, test;
};

// Deterministic per config (the same bytes on every platform: own integer RNG, no
// std::*_distribution). Throws std::invalid_argument listing every problem of `config`.
SyntheticTask generate_synthetic_task(const SyntheticConfig& config);

// DIR/{train,valid,test}.{src,tgt} (one sentence a line), DIR/grammar.json and DIR/README.md,
// each written atomically; creates DIR.
void write_synthetic_task(const SyntheticTask& task, const std::string& dir);

}  // namespace normlab::data
