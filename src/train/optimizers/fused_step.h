// Lion's and schedule-free AdamW's updates in one pass over each parameter on the CPU (issue 36
// §4: "fused as Adam's is"), where their _foreach calls (lion.cpp, schedule_free.cpp) make 7 and
// 10 passes. The same operations with the same roundings: bit for bit the _foreach calls'
// results (fused_rows_impl.h says how; tests/train/fused_step_test.cpp checks it).
#pragma once

#include <vector>

#include <torch/types.h>

namespace normlab::train::fused {

// Whether the fused loops take these tensors: float32 or float64, all of one dtype, contiguous,
// on the CPU, and a CPU with AVX2 and FMA. Elsewhere (CUDA, bf16 parameters) the _foreach calls run.
bool applies(const std::vector<torch::Tensor>& tensors);

// Lion (Chen et al. 2023, Algorithm 2; lion.cpp) at rate lr, decoupled decay weight_decay.
struct LionStep {
  double lr, weight_decay, beta1, beta2;
};
void lion(const torch::Tensor& p, const torch::Tensor& grad, const torch::Tensor& exp_avg, const LionStep& s);

// Whether the fused schedule-free step takes these tensors: applies(), and torch.sqrt's square
// root is known here (MKL's, found in libtorch_cpu at run time).
bool schedule_free_applies(const std::vector<torch::Tensor>& tensors);

// Schedule-free AdamW (Defazio et al. 2024; schedule_free.cpp's formulas at one step's scalars).
struct ScheduleFreeStep {
  double lr;                 // lr_k times the parameter's lr scale
  double beta1, beta2, eps, weight_decay;
  double c;                  // the average's weight of z_{t+1}
  double bias_correction2;   // 1 - b2^(k+1)
};
void schedule_free(const torch::Tensor& y, const torch::Tensor& grad, const torch::Tensor& z,
                   const torch::Tensor& exp_avg_sq, const ScheduleFreeStep& s);

}  // namespace normlab::train::fused
