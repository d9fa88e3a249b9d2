// The encoded corpus cached as a binary file, keyed by what it was made from (docs/data.md,
// "Encoded-corpus cache"): a stale, truncated or corrupted cache file is never used.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/corpus.h"

namespace normlab::data {

class Vocab;

constexpr uint32_t kCacheFormatVersion = 1;

// The cache key: the 64-bit checksum of `core/hash.h` (FNV-1a over 64-bit words) over the cache format and text-normalisation versions, then, in
// order, each input file's bytes as stored (.gz as compressed) and the model's bytes.
uint64_t corpus_cache_key(const std::vector<std::string>& input_files, const std::string& model_bytes);

struct EncodedCorpus {
  std::vector<Sentence> src, tgt;  // line-aligned token ids, no special tokens
};

// DIR/NAME.KEY.bin, KEY as 16 lower-case hex digits.
std::string cache_file_path(const std::string& dir, const std::string& name, uint64_t key);

// Writes the corpus atomically (header: magic, version, key, counts; checksum last).
// Throws std::runtime_error when the file cannot be written.
void save_encoded(const std::string& path, uint64_t key, const EncodedCorpus& corpus);

// The corpus, or nullopt with `why` set when the file is missing, truncated, corrupted (bad
// checksum), of another format version or made for another key. Never throws on bad content.
std::optional<EncodedCorpus> load_encoded(const std::string& path, uint64_t key, std::string* why);

struct LoadedCorpus {
  EncodedCorpus corpus;
  bool from_cache = false;
  std::string cache_file;  // empty without a cache folder
  std::string message;     // one line for the log: hit, miss, or why a cache file was ignored
  std::string src_path, tgt_path;  // the text files the corpus comes from
};

// PREFIX.SRC/PREFIX.TGT encoded with `vocab`: from CACHE_DIR when a file with the current key
// is there and intact, else read (read_parallel), encoded and, if CACHE_DIR is not empty,
// written there (NAME = PREFIX's file name + ".SRC-TGT"). Errors of reading throw as there.
LoadedCorpus load_encoded_corpus(const std::string& prefix, const std::string& src_lang,
                                 const std::string& tgt_lang, const Vocab& vocab,
                                 const std::string& cache_dir);

}  // namespace normlab::data
