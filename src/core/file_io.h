// File I/O that never leaves a half-written file behind.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace normlab::core {

// Writes `bytes` to `path` through a temporary file in the same folder, fsync and a rename, so that
// readers see the old file or the new one, never a partial one. Throws std::runtime_error.
void write_file_atomic(const std::string& path, const std::vector<char>& bytes);
void write_file_atomic(const std::string& path, const std::string& text);

// Appends bytes to the file being written (throws std::runtime_error naming it).
using ByteSink = std::function<void(const char* bytes, size_t n)>;

// The same, for contents too large to hold twice in memory: `produce` writes them through the sink
// it is given, straight to the temporary file. If `produce` throws, the temporary is removed, the
// old file is left as it was and the exception goes on.
void write_file_atomic(const std::string& path, const std::function<void(const ByteSink&)>& produce);

// Whole file as bytes. Throws std::runtime_error naming the file when it cannot be read.
std::vector<char> read_file(const std::string& path);

}  // namespace normlab::core
