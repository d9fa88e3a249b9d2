#include "data/cache.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>

#include "core/hash.h"
#include "core/file_io.h"
#include "data/vocab.h"

namespace normlab::data {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'N', 'L', 'C', 'O', 'R', 'P', 'U', 'S'};
// Bump when read_text_lines/normalize_whitespace change what they produce: old caches then miss.
constexpr uint32_t kTextNormalizationVersion = 1;
constexpr size_t kHeaderBytes = 48;  // magic, version, token bytes, key, pairs, src and tgt tokens

// Little-endian, whatever the host.
void put(std::vector<char>& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
uint64_t get(const std::vector<char>& in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return v;
}

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

uint64_t corpus_cache_key(const std::vector<std::string>& input_files, const std::string& model_bytes) {
  const uint32_t versions[2] = {kCacheFormatVersion, kTextNormalizationVersion};
  uint64_t h = core::hash_bytes(versions, sizeof versions);
  for (const auto& file : input_files) {
    const auto bytes = core::read_file(file);
    const uint64_t size = bytes.size();  // lengths too, so that file boundaries count
    h = core::hash_bytes(&size, sizeof size, h);
    h = core::hash_bytes(bytes.data(), bytes.size(), h);
  }
  const uint64_t size = model_bytes.size();
  h = core::hash_bytes(&size, sizeof size, h);
  return core::hash_bytes(model_bytes.data(), model_bytes.size(), h);
}

std::string cache_file_path(const std::string& dir, const std::string& name, uint64_t key) {
  return (fs::path(dir) / (name + "." + hex16(key) + ".bin")).string();
}

void save_encoded(const std::string& path, uint64_t key, const EncodedCorpus& corpus) {
  if (corpus.src.size() != corpus.tgt.size())
    throw std::invalid_argument("save_encoded: " + std::to_string(corpus.src.size()) + " source but " +
                                std::to_string(corpus.tgt.size()) + " target sentences");
  uint64_t src_tokens = 0, tgt_tokens = 0;
  for (const auto& s : corpus.src) src_tokens += s.size();
  for (const auto& t : corpus.tgt) tgt_tokens += t.size();
  std::vector<char> out(kMagic, kMagic + sizeof kMagic);
  out.reserve(kHeaderBytes + 8 * corpus.src.size() + 4 * (src_tokens + tgt_tokens) + 8);
  put(out, kCacheFormatVersion, 4);
  put(out, 4, 4);  // bytes per token id
  put(out, key, 8);
  put(out, corpus.src.size(), 8);
  put(out, src_tokens, 8);
  put(out, tgt_tokens, 8);
  for (const auto* side : {&corpus.src, &corpus.tgt})
    for (const auto& s : *side) put(out, s.size(), 4);
  for (const auto* side : {&corpus.src, &corpus.tgt})
    for (const auto& s : *side)
      for (const auto id : s) {
        if (id < 0 || id > std::numeric_limits<int32_t>::max())
          throw std::invalid_argument("save_encoded: token id " + std::to_string(id) + " does not fit 32 bits");
        put(out, static_cast<uint64_t>(id), 4);
      }
  put(out, core::hash_bytes(out.data(), out.size()), 8);
  core::write_file_atomic(path, out);
}

std::optional<EncodedCorpus> load_encoded(const std::string& path, uint64_t key, std::string* why) {
  const auto fail = [&](const std::string& reason) -> std::optional<EncodedCorpus> {
    if (why) *why = reason;
    return std::nullopt;
  };
  std::error_code ec;
  if (!fs::exists(path, ec)) return fail("no cache file");
  std::vector<char> in;
  try {
    in = core::read_file(path);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  if (in.size() < kHeaderBytes + 8 || std::memcmp(in.data(), kMagic, sizeof kMagic) != 0)
    return fail("not a normlab corpus cache (bad magic or shorter than its header)");
  if (get(in, 8, 4) != kCacheFormatVersion)
    return fail("format version " + std::to_string(get(in, 8, 4)) + ", expected " + std::to_string(kCacheFormatVersion));
  if (get(in, 12, 4) != 4) return fail("unsupported token width " + std::to_string(get(in, 12, 4)));
  if (get(in, 16, 8) != key) return fail("made for key " + hex16(get(in, 16, 8)) + ", not " + hex16(key));
  const uint64_t pairs = get(in, 24, 8), src_tokens = get(in, 32, 8), tgt_tokens = get(in, 40, 8);
  const uint64_t limit = uint64_t{1} << 40;  // keeps the size arithmetic below from overflowing
  if (pairs > limit || src_tokens > limit || tgt_tokens > limit ||
      in.size() != kHeaderBytes + 8 * pairs + 4 * (src_tokens + tgt_tokens) + 8)
    return fail("truncated or corrupted: " + std::to_string(in.size()) + " bytes do not match the header's counts");
  if (get(in, in.size() - 8, 8) != core::hash_bytes(in.data(), in.size() - 8))
    return fail("corrupted: checksum mismatch");
  EncodedCorpus corpus;
  size_t len_at = kHeaderBytes, tok_at = kHeaderBytes + 8 * pairs;
  for (auto* side : {&corpus.src, &corpus.tgt}) {
    side->resize(pairs);
    for (auto& s : *side) {
      const auto n = get(in, len_at, 4);
      len_at += 4;
      if (tok_at + 4 * n > in.size() - 8) return fail("corrupted: lengths exceed the token count");
      s.resize(n);
      for (auto& id : s) {
        id = static_cast<int64_t>(get(in, tok_at, 4));
        tok_at += 4;
      }
    }
  }
  if (tok_at != in.size() - 8) return fail("corrupted: lengths do not add up to the token count");
  return corpus;
}

LoadedCorpus load_encoded_corpus(const std::string& prefix, const std::string& src_lang,
                                 const std::string& tgt_lang, const Vocab& vocab,
                                 const std::string& cache_dir) {
  LoadedCorpus out;
  out.src_path = resolve_corpus_file(prefix, src_lang);
  out.tgt_path = resolve_corpus_file(prefix, tgt_lang);
  std::string note;
  uint64_t key = 0;
  if (!cache_dir.empty()) {
    key = corpus_cache_key({out.src_path, out.tgt_path}, vocab.bytes());
    const auto name = fs::path(prefix).filename().string() + "." + src_lang + "-" + tgt_lang;
    out.cache_file = cache_file_path(cache_dir, name, key);
    std::string why;
    if (auto cached = load_encoded(out.cache_file, key, &why)) {
      out.corpus = std::move(*cached);
      out.from_cache = true;
      out.message = "loaded " + std::to_string(out.corpus.src.size()) + " encoded pairs from cache " + out.cache_file;
      return out;
    }
    if (why != "no cache file") note = "ignored cache " + out.cache_file + " (" + why + "); ";
  }
  const auto text = read_parallel(prefix, src_lang, tgt_lang);
  out.corpus.src = encode_all(vocab, text.src);
  out.corpus.tgt = encode_all(vocab, text.tgt);
  out.message = note + "encoded " + std::to_string(out.corpus.src.size()) + " pairs of " + out.src_path +
                " and " + out.tgt_path;
  if (!out.cache_file.empty()) {
    // A cache that cannot be written costs time, not correctness: say so and go on.
    try {
      std::error_code ec;
      fs::create_directories(cache_dir, ec);
      save_encoded(out.cache_file, key, out.corpus);
      out.message += ", cached in " + out.cache_file;
    } catch (const std::exception& e) {
      out.message += "; not cached: " + std::string(e.what());
      out.cache_file.clear();
    }
  }
  return out;
}

}  // namespace normlab::data
