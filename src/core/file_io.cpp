#include "core/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace normlab::core {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("cannot write " + path + ": " + what);
}

}  // namespace

void write_file_atomic(const std::string& path, const std::function<void(const ByteSink&)>& produce) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, std::strerror(errno));
  const ByteSink sink = [&](const char* bytes, size_t size) {
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(fd, bytes + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail(path, std::strerror(errno));
      done += static_cast<size_t>(n);
    }
  };
  try {
    produce(sink);
  } catch (...) {
    ::close(fd);
    std::remove(tmp.c_str());
    throw;
  }
  // The data reaches the disk before the rename makes it visible under the real name.
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(tmp.c_str());
    fail(path, reason);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(tmp.c_str());
    fail(path, reason);
  }
  // And the rename itself survives a crash: sync the folder's entry.
  auto dir = std::filesystem::path(path).parent_path();
  const int dir_fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

void write_file_atomic(const std::string& path, const std::vector<char>& bytes) {
  write_file_atomic(path, [&](const ByteSink& sink) { sink(bytes.data(), bytes.size()); });
}

void write_file_atomic(const std::string& path, const std::string& text) {
  write_file_atomic(path, [&](const ByteSink& sink) { sink(text.data(), text.size()); });
}

std::vector<char> read_file(const std::string& path) {
  // An ifstream opens a directory, then throws basic_filebuf's "Is a directory" mid-read.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw std::runtime_error("cannot read " + path + ": it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace normlab::core
