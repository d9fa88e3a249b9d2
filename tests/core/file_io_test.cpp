// Atomic writes leave either the old or the new file, and no temporary behind.
#include <filesystem>

#include <gtest/gtest.h>

#include "core/file_io.h"

using namespace normlab::core;
namespace fs = std::filesystem;

TEST(FileIo, AtomicWriteReplacesWholeFileAndLeavesNoTemporary) {
  const fs::path dir = fs::temp_directory_path() / "normlab_file_io_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto path = (dir / "a.txt").string();
  write_file_atomic(path, std::string("first version, longer"));
  write_file_atomic(path, std::string("second"));
  const auto bytes = read_file(path);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "second");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  fs::remove_all(dir);
}

TEST(FileIo, UnwritableAndMissingFilesNameThePath) {
  try {
    write_file_atomic("/nonexistent-dir/x.bin", std::string("x"));
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.bin"), std::string::npos);
  }
  EXPECT_THROW(read_file("/nonexistent-dir/y.bin"), std::runtime_error);
}

// Issue 34: a folder given for a file (--valid, --vocab) was basic_filebuf's "Is a directory".
TEST(FileIo, ADirectoryIsRefusedNamingIt) {
  const auto dir = fs::temp_directory_path() / "normlab_read_dir";
  fs::create_directories(dir);
  try {
    read_file(dir.string());
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot read " + dir.string() + ": it is a directory");
  }
  fs::remove_all(dir);
}

TEST(FileIo, StreamedWriteThatFailsLeavesTheOldFileAndNoTemporary) {
  const fs::path dir = fs::temp_directory_path() / "normlab_file_io_stream_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto path = (dir / "state.bin").string();
  write_file_atomic(path, [](const ByteSink& sink) {
    sink("ab", 2);
    sink("cd", 2);
  });
  const auto first = read_file(path);
  EXPECT_EQ(std::string(first.begin(), first.end()), "abcd");
  EXPECT_THROW(write_file_atomic(path,
                                 [](const ByteSink& sink) {
                                   sink("partial", 7);
                                   throw std::runtime_error("producer failed");
                                 }),
               std::runtime_error);
  const auto after = read_file(path);
  EXPECT_EQ(std::string(after.begin(), after.end()), "abcd");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  fs::remove_all(dir);
}
