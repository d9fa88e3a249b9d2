// Special token ids, fairseq's numbering (docs/conventions.md). Shared by data and model.
#pragma once

#include <cstdint>

namespace normlab {

constexpr int64_t kBos = 0;  // reserved, as in fairseq
constexpr int64_t kPad = 1;  // padding: masked in attention and in the loss
constexpr int64_t kEos = 2;  // appended to sources and targets; the decoder's start token
constexpr int64_t kUnk = 3;
constexpr int64_t kNumSpecialTokens = 4;
// Token at 0-based index t has sinusoidal position t + kPositionOffset (fairseq: pad + 1).
constexpr int64_t kPositionOffset = kPad + 1;

}  // namespace normlab
