// Downstream classification tasks built from the held-out text of `normlab lm-data` (docs/data.md,
// "Downstream tasks"), for Xiong et al. 2020 Fig. 5(b, c) where MRPC/RTE cannot be had: a
// task's train.tsv from valid.txt's documents, its dev.tsv from test.txt's (the LM trains on
// train.txt only). Pure pieces first, then the files. No torch.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "data/classification.h"

namespace normlab::data {

// Names the rules below; written into the manifest. Change it with any rule.
constexpr const char* kLmTasksVersion = "lm-tasks-2";  // 2: --max-examples a seeded sample

// "next-line", "word-order": the tasks, in the order they are built.
const std::vector<std::string>& lm_task_names();

struct LmTaskOptions {
  uint64_t seed = 1;         // --seed: with the task and split names, every random decision
  int64_t min_words = 4;     // --min-words: a unit has at least this many words
  int64_t max_words = 30;    // --max-words: and at most this many
  int64_t max_examples = 0;  // --max-examples: a seeded sample of N examples of each file, in order (0: all)
  void validate() const;     // throws std::invalid_argument naming every bad option
};

// A document's units: its lines (split at "\n") with min_words..max_words words (runs of ASCII
// white space separate words, as count_words counts them), in order, each as its words joined by
// single spaces (the line itself for lm-data's normalised text).
std::vector<std::string> task_units(const std::string& document_text, const LmTaskOptions& options);

// The word positions i (0-based) of `unit` whose words i and i+1 may be swapped for word-order:
// both are lowercase ASCII letters and apostrophes with at least one letter, and they differ.
std::vector<int64_t> swappable_positions(const std::string& unit);

// `unit` with words i and i+1 swapped, joined by single spaces. Throws std::out_of_range when
// i + 1 is not a word position.
std::string swap_adjacent_words(const std::string& unit, int64_t i);

// The generator of one task's file: std::mt19937_64 seeded with core::hash_bytes over the 8
// bytes of `seed`, then TASK and a NUL, then SPLIT and a NUL (split: "valid" or "test").
std::mt19937_64 task_generator(uint64_t seed, const std::string& task, const std::string& split);
// Uniform on [0, n) from raw 64-bit outputs (x % n, rejecting x >= 2^64 - 2^64 mod n), so the
// same on every standard library; n >= 1.
uint64_t draw_below(std::mt19937_64& rng, uint64_t n);
// A fair coin: the top bit of one output.
bool draw_coin(std::mt19937_64& rng);

// One held-out document as the tasks see it.
struct TaskDocument {
  std::string name, group;         // the lm-data manifest's
  std::vector<std::string> units;  // task_units of its text
};

// next-line (BERT's next-sentence prediction, Devlin et al. 2019 §3.1 "Task #2"): for each
// document in order and each unit i with a unit i+1 in it, a coin; heads: 1<TAB>u_i<TAB>u_{i+1};
// tails: 0<TAB>u_i<TAB>R, R the k-th unit (k = draw_below(M)) of the M units, in order, of the
// documents of other groups. Throws std::invalid_argument when fewer than two groups have units.
std::vector<ClassificationExample> make_next_line_examples(const std::vector<TaskDocument>& documents,
                                                           std::mt19937_64& rng);

// word-order: for each unit in order with swappable_positions P non-empty, a coin; heads:
// 1<TAB>unit; tails: 0<TAB>unit with the words at P[draw_below(|P|)] swapped. Other units are left out.
std::vector<ClassificationExample> make_word_order_examples(const std::vector<TaskDocument>& documents,
                                                            std::mt19937_64& rng);

// One held-out split of an lm-data folder: DIR/manifest.json's splits.SPLIT.document_list cut
// out of DIR/SPLIT.txt.
struct TaskSplit {
  std::string file;         // "valid.txt"
  int64_t bytes = 0;        // its size
  std::string hash;         // core::hash_hex of its bytes
  int64_t groups = 0;       // distinct groups of its documents
  std::vector<TaskDocument> documents;  // in the manifest's order
};

// Throws std::runtime_error naming the missing file, or naming the manifest when its offsets,
// sizes or word counts do not match the text file (e.g. a manifest of another folder).
TaskSplit read_task_split(const std::string& data_dir, const std::string& split, const LmTaskOptions& options);

// What one output file holds (the manifest's entry, and the command's summary).
struct LmTaskFileReport {
  std::string task, file;  // "next-line", "train"
  std::string split, source_file, source_hash;  // "valid", "valid.txt", TaskSplit::hash
  int64_t source_bytes = 0, documents = 0, groups = 0, units = 0;
  int64_t candidates = 0;  // next-line: units with a next unit; word-order: units with a swappable pair
  int64_t examples = 0;    // written (candidates, or --max-examples)
  std::map<int64_t, int64_t> labels;  // label -> examples written
};

// Writes OUT/TASK/{train,dev}.tsv for every task and OUT/manifest.json, each atomically, from the
// lm-data folder `data_dir`. Throws as read_task_split, make_next_line_examples and
// LmTaskOptions::validate do.
std::vector<LmTaskFileReport> write_lm_tasks(const std::string& data_dir, const std::string& out,
                                             const LmTaskOptions& options);

}  // namespace normlab::data
