// A fast 64-bit content checksum: FNV-1a applied to 64-bit little-endian words (bytes for the
// tail). For detecting corrupted files and keying caches, not for security.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace normlab::core {

constexpr uint64_t kHashSeed = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset basis

// Continues the hash `h` over `size` bytes at `data`.
uint64_t hash_bytes(const void* data, size_t size, uint64_t h = kHashSeed);

// 16 lowercase hex digits.
std::string hash_hex(uint64_t h);

}  // namespace normlab::core
