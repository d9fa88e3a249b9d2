// The checksum: FNV-1a 64 on bytes agrees with the published test vectors for inputs shorter
// than a word; words and bytes are both covered; any changed byte changes the hash.
#include <string>

#include <gtest/gtest.h>

#include "core/hash.h"

using namespace normlab::core;

TEST(Hash, ShortInputsAreFnv1a64) {
  // FNV-1a 64 test vectors (Fowler, Noll, Vo): "" and "a".
  EXPECT_EQ(hash_bytes("", 0), 0xcbf29ce484222325ULL);
  EXPECT_EQ(hash_bytes("a", 1), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(hash_bytes("foobar", 6), 0x85944171f73967e8ULL);
  EXPECT_EQ(hash_hex(0xaf63dc4c8601ec8cULL), "af63dc4c8601ec8c");
}

TEST(Hash, EveryByteMatters) {
  std::string s(37, 'x');
  const auto h = hash_bytes(s.data(), s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    auto t = s;
    t[i] = 'y';
    EXPECT_NE(hash_bytes(t.data(), t.size()), h) << i;
  }
}
