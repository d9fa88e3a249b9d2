// File I/O that never leaves a half-written file behind.
#pragma once

#include <string>
#include <vector>

namespace normlab::core {

// Writes `bytes` to `path` through a temporary file in the same folder, fsync and a rename, so that
// readers see the old file or the new one, never a partial one. Throws std::runtime_error.
void write_file_atomic(const std::string& path, const std::vector<char>& bytes);
void write_file_atomic(const std::string& path, const std::string& text);

// Whole file as bytes. Throws std::runtime_error naming the file when it cannot be read.
std::vector<char> read_file(const std::string& path);

}  // namespace normlab::core
