#include "core/hash.h"

#include <cstdio>
#include <cstring>

namespace normlab::core {

constexpr uint64_t kPrime = 0x100000001b3ULL;  // FNV-1a 64 prime

uint64_t hash_bytes(const void* data, size_t size, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, p + i, 8);
    h = (h ^ word) * kPrime;
  }
  for (; i < size; ++i) h = (h ^ p[i]) * kPrime;
  return h;
}

std::string hash_hex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace normlab::core
