// Helpers shared by the data tests: a scratch folder, small files, and the real corpora.
#pragma once

#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace normlab::testing {

// A file's bytes.
inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A fresh folder under the system's temporary folder, removed when the object goes; the
// process id keeps concurrent test runs (other checkouts, ctest -j) apart.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              ("normlab_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& file) const { return (path_ / file).string(); }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline void write_gzip(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

// ../shared/data as seen from the repository root (CMake passes it), or "" when absent.
inline std::string shared_data(const std::string& file) {
#ifdef NORMLAB_SHARED_DATA
  const auto path = std::string(NORMLAB_SHARED_DATA) + "/" + file;
  if (std::filesystem::exists(path)) return path;
#endif
  return "";
}

}  // namespace normlab::testing

// Skips the test when the shared data folder lacks `file`; sets `var` to its path otherwise.
#define NORMLAB_REQUIRE_SHARED_DATA(var, file)                                                   \
  const std::string var = normlab::testing::shared_data(file);                                    \
  if (var.empty()) GTEST_SKIP() << "shared data file " << (file) << " not found (../shared/data)"
