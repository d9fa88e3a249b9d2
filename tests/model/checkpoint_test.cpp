// Checkpoints round-trip exactly; damaged or foreign files give errors naming the file.
#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/hash.h"
#include "model/checkpoint.h"
#include "model/seq2seq.h"
#include "tiny_model.h"

using namespace normlab::model;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("normlab_test_" + name)).string();
}

Seq2Seq small(SharedEmbeddings share) {
  auto c = normlab::test::tiny_config("admin");
  c.share = share;
  Seq2Seq m(c);
  initialize(m, 5);
  return m;
}

}  // namespace

TEST(Checkpoint, RoundTripsEveryParameterAndTheConfig) {
  for (auto share : {SharedEmbeddings::kAll, SharedEmbeddings::kDecoder, SharedEmbeddings::kNone}) {
    auto m = small(share);
    const auto path = temp_path("roundtrip.ckpt");
    save_model(path, m, {{"seed", 5}});
    auto loaded = load_model(path);
    EXPECT_EQ(loaded.meta.at("seed"), 5);
    EXPECT_EQ(loaded.model->config().share, share);
    auto a = named_parameters(m);
    auto b = named_parameters(loaded.model);
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [name, t] : a) EXPECT_TRUE(torch::equal(t, b.at(name))) << name;
    std::remove(path.c_str());
  }
}

TEST(Checkpoint, SharedTablesAreOneParameter) {
  auto m = small(SharedEmbeddings::kAll);
  auto params = named_parameters(m);
  EXPECT_EQ(params.count("encoder.embed_tokens.weight"), 1u);
  EXPECT_EQ(params.count("decoder.embed_tokens.weight"), 0u);
  EXPECT_EQ(m->decoder->output_weight().data_ptr(), m->encoder->embed_tokens->weight.data_ptr());
}

TEST(Checkpoint, TruncatedFileIsAnErrorNamingIt) {
  auto m = small(SharedEmbeddings::kDecoder);
  const auto path = temp_path("truncated.ckpt");
  save_model(path, m);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  try {
    load_model(path);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
  std::remove(path.c_str());
}

TEST(Checkpoint, ForeignTensorFileIsNotACheckpoint) {
  const auto path = temp_path("foreign.pt");
  save_tensors(path, {{"weight", torch::ones({2})}});
  EXPECT_THROW(
      {
        try {
          load_model(path);
        } catch (const std::runtime_error& e) {
          EXPECT_NE(std::string(e.what()).find("not a normlab checkpoint"), std::string::npos);
          throw;
        }
      },
      std::runtime_error);
  std::remove(path.c_str());
}

TEST(Checkpoint, ExtraTensorsRoundTripAndCorruptionIsDetected) {
  auto m = small(SharedEmbeddings::kDecoder);
  const auto path = temp_path("extra.ckpt");
  auto state = torch::arange(6, torch::kFloat64);
  save_model(path, m, {}, {{"optimizer/exp_avg.x", state}});
  auto loaded = load_model(path);
  ASSERT_EQ(loaded.extra_tensors.count("optimizer/exp_avg.x"), 1u);
  EXPECT_TRUE(torch::equal(loaded.extra_tensors.at("optimizer/exp_avg.x"), state));
  // Change one stored value behind the checksum's back: rewrite the dict with a modified tensor
  // but the old metadata.
  auto raw = load_tensors(path);
  raw.at("encoder.embed_tokens.weight")[5][0] += 1.0f;
  save_tensors(path, raw);
  try {
    load_model(path);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos);
  }
  std::remove(path.c_str());
}

// Issue 34: one digit changed in the metadata (the update to resume from, a head count) used to
// load with exit 0: the checksum covered the tensors only. Now it covers the metadata too.
TEST(Checkpoint, AChangedDigitInTheMetadataIsRefusedNamingTheFile) {
  auto m = small(SharedEmbeddings::kDecoder);
  const auto path = temp_path("meta_digit.ckpt");
  const int64_t heads = m->config().heads;
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"\"update\":108", "\"update\":109"},
                                 {"\"heads\":" + std::to_string(heads), "\"heads\":" + std::to_string(heads * 2)}}) {
    save_model(path, m, {{"update", 108}, {"epoch", 3}});
    auto raw = load_tensors(path);
    std::string text = tensor_bytes(raw.at("__normlab_meta__"));
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << text;
    raw["__normlab_meta__"] = bytes_tensor(text.replace(at, from.size(), to));
    save_tensors(path, raw);
    try {
      load_model(path);
      ADD_FAILURE() << "loaded with " << to;
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(path + ": checksum mismatch", 0), 0u) << what;
    }
  }
  std::remove(path.c_str());
}

// A version-1 file (before issue 34: the checksum over the tensors only, FNV-1a over names and
// bytes in name order, recomputed here) still loads; its tensors are still checked.
TEST(Checkpoint, VersionOneFilesLoadWithTheirTensorsChecked) {
  auto m = small(SharedEmbeddings::kDecoder);
  const auto path = temp_path("version1.ckpt");
  save_model(path, m, {{"update", 7}});
  auto raw = load_tensors(path);
  auto meta = nlohmann::json::parse(tensor_bytes(raw.at("__normlab_meta__")));
  raw.erase("__normlab_meta__");
  uint64_t h = normlab::core::kHashSeed;
  for (const auto& [name, t] : raw) {
    auto c = t.contiguous();
    h = normlab::core::hash_bytes(name.data(), name.size(), h);
    h = normlab::core::hash_bytes(c.data_ptr(), c.nbytes(), h);
  }
  meta["version"] = 1;
  meta["checksum"] = normlab::core::hash_hex(h);
  raw["__normlab_meta__"] = bytes_tensor(meta.dump());
  save_tensors(path, raw);
  EXPECT_EQ(load_model(path).meta.at("update"), 7);
  raw.at("encoder.embed_tokens.weight")[0][0] += 1.0f;
  save_tensors(path, raw);
  EXPECT_THROW(load_model(path), std::runtime_error);
  std::remove(path.c_str());
}

// A view is stored as its own elements, not its base's: the Lanczos state saves the basis rows used
// so far out of a preallocated (steps+1, n) matrix, which would otherwise write every row each time.
TEST(Checkpoint, ViewsAreStoredWithoutTheRestOfTheirBase) {
  const auto path = temp_path("views.pt");
  auto base = torch::arange(400 * 1000, torch::kFloat32).reshape({400, 1000});  // 1.6 MB
  auto rows = base.narrow(0, 0, 3);                                              // 12 KB
  auto inner = base.narrow(0, 5, 2);  // not at the start of the storage
  save_tensors(path, {{"rows", rows}, {"inner", inner}, {"whole", torch::ones({4})}});
  EXPECT_LT(std::filesystem::file_size(path), 5u * 1000 * 4 + 8192);
  auto loaded = load_tensors(path);
  EXPECT_TRUE(torch::equal(loaded.at("rows"), rows));
  EXPECT_TRUE(torch::equal(loaded.at("inner"), inner));
  EXPECT_TRUE(torch::equal(loaded.at("whole"), torch::ones({4})));
  EXPECT_EQ(base[399][999].item<float>(), 399999.0f);  // the base is untouched
  std::remove(path.c_str());
}

TEST(Checkpoint, MissingFileIsAnErrorNamingIt) {
  const auto path = temp_path("does-not-exist.pt");
  try {
    load_tensors(path);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
}

// A write that fails half-way (here the file size limit, as a full disk would) is an error naming
// the file, leaves the old file as it was and no temporary; the program goes on.
TEST(Checkpoint, FailedWriteKeepsTheOldFile) {
  const auto dir = std::filesystem::temp_directory_path() / "normlab_test_failed_write";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto path = (dir / "state.pt").string();
  save_tensors(path, {{"small", torch::ones({4})}});
  const auto before = std::filesystem::file_size(path);

  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG
  rlimit small = old;
  small.rlim_cur = 256 * 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string error;
  try {
    save_tensors(path, {{"big", torch::zeros({1 << 20})}});  // 4 MB
  } catch (const std::runtime_error& e) {
    error = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);

  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_EQ(std::filesystem::file_size(path), before);
  EXPECT_TRUE(torch::equal(load_tensors(path).at("small"), torch::ones({4})));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1);
  std::filesystem::remove_all(dir);
}
