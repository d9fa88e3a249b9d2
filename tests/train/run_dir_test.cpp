// The run folder's record cutting (train/run_dir.h): what a resumed run keeps of metrics.jsonl.
#include <fstream>
#include <sstream>
#include <string>

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

}  // namespace
}  // namespace normlab::train
