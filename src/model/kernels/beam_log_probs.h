// The beam search's per-step scores of every continuation, fused for the CPU:
// out[i, v] = log_softmax(logits[i])[v] + scores[i], in float arithmetic, with fairseq's NaN
// -> -inf (a row with a NaN, or no finite maximum, is all -inf, as ATen's log_softmax makes it
// all NaN). One read of the (N,V) logits (each row twice, from cache) and one write, instead of
// a float copy of bf16 logits, log_softmax, the NaN test, its masked fill and the add of the
// beams' scores, each a pass over N x V (docs/performance.md, Decoding).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace normlab::model::kernels {

// Whether beam_log_probs() runs the fused rows (float32, bf16 or fp16 logits on a CPU with
// AVX2 and FMA) rather than the ATen composition it is tested against.
bool beam_log_probs_fused(const torch::Tensor& logits);
// logits (N,V), scores (N) in the result's dtype or undefined (0) -> (N,V): float32, or
// float64 for float64 logits.
torch::Tensor beam_log_probs(const torch::Tensor& logits, const torch::Tensor& scores);

// One step's candidates per row: the k best entries of beam_log_probs(logits, scores) after the
// search's masks (fairseq's): the ids in `banned` are -inf, and rows i with eos_only[i] != 0
// (eos_only empty, or one entry per row) may only produce `eos`. Fused on the CPU (selected
// during the pass that computes the values, so the (N,V) scores are never written; an equal
// value keeps the lower id first), else ATen's topk of the masked composition. values (N,k)
// best first, as beam_log_probs' dtype; ids (N,k) int64. 1 <= k <= V.
struct BeamCandidates {
  torch::Tensor values, ids;
};
BeamCandidates beam_candidates(const torch::Tensor& logits, const torch::Tensor& scores, int64_t k,
                               const std::vector<int64_t>& banned, const std::vector<uint8_t>& eos_only, int64_t eos);

}  // namespace normlab::model::kernels
