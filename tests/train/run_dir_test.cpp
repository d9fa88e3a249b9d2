// The run folder's record cutting (train/run_dir.h): what a resumed run keeps of metrics.jsonl.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../data/test_data.h"
#include "train/run_dir.h"

namespace normlab::train {
namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(RunDir, ResumeKeepsTheRecordsUpToItsPositionAndDropsLinesThatAreNotRecords) {
  testing::ScratchDir dir("run_dir");
  testing::write_text(dir / "metrics.jsonl",
                      "{\"step\":1,\"loss\":5}\n"
                      "5\n"                                                   // not an object
                      "\n"                                                    // blank
                      "{\"step\":2,\"epoch\":1,\"valid_loss\":4,\"mid_epoch\":true}\n"  // mid-epoch: kept
                      "{\"step\":2,\"epoch\":1,\"valid_loss\":4}\n"           // end of epoch 1: written again
                      "{\"step\":3,\"loss\":4}\n"                             // after the checkpoint
                      "{\"step\":4,\"lo");                                    // cut by a kill
  RunDir run(dir.str(), /*writes=*/true);
  run.cut_records(/*update=*/2, /*epoch=*/1);
  EXPECT_EQ(read(dir / "metrics.jsonl"),
            "{\"step\":1,\"loss\":5}\n{\"step\":2,\"epoch\":1,\"valid_loss\":4,\"mid_epoch\":true}\n");
  run.cut_records(/*update=*/-1, /*epoch=*/0);  // a new run: nothing of an earlier start is kept
  EXPECT_EQ(read(dir / "metrics.jsonl"), "");
}

TEST(RunDir, KeepRecordsLeavesAMissingFileMissing) {
  testing::ScratchDir dir("run_dir_missing");
  keep_records(dir / "curvature.jsonl", [](const nlohmann::json&) { return true; });
  EXPECT_FALSE(std::filesystem::exists(dir / "curvature.jsonl"));
}

// Issue 34: a writer killed mid-save leaves NAME.pt.tmp.PID; the next writer (holding the lock)
// removes them and nothing else.
TEST(RunDir, AWriterRemovesTheTemporaryFilesOfAKilledSave) {
  testing::ScratchDir dir("run_dir_tmp");
  std::filesystem::create_directories(dir / "checkpoints");
  testing::write_text(dir / "checkpoints/checkpoint_last.pt.tmp.4242", "half a checkpoint");
  testing::write_text(dir / "checkpoints/checkpoint3.pt.tmp.17", "");
  testing::write_text(dir / "checkpoints/checkpoint_best.pt", "kept");
  testing::write_text(dir / "checkpoints/notes.tmp", "kept");
  RunDir reader(dir.str(), /*writes=*/false);  // another rank: touches nothing
  EXPECT_TRUE(std::filesystem::exists(dir / "checkpoints/checkpoint3.pt.tmp.17"));
  RunDir run(dir.str(), /*writes=*/true);
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir / "checkpoints"))
    left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"checkpoint_best.pt", "notes.tmp"}));
}

}  // namespace
}  // namespace normlab::train
