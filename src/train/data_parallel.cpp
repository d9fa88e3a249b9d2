#include "train/data_parallel.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "core/hash.h"

namespace normlab::train {
namespace {

constexpr const char* kRngKey = "rng/cpu";  // rank 0's dropout stream; rank r's under kRngKey/rank<r>

std::string rng_key(int rank) { return rank == 0 ? kRngKey : std::string(kRngKey) + "/rank" + std::to_string(rank); }

// Dropout stream of rank r > 0.
uint64_t rank_seed(uint64_t seed, int rank) {
  const uint64_t r = static_cast<uint64_t>(rank);
  return core::hash_bytes(&r, sizeof r, seed);
}

}  // namespace

void DataParallel::in_turn(const std::function<void()>& f) const {
  if (!writer()) group_.barrier();
  f();
  if (writer()) group_.barrier();
}

Sums DataParallel::all_reduced(const Sums& s) const {
  if (group_.size() == 1) return s;
  auto t = torch::tensor({s.loss, s.nll, static_cast<double>(s.tokens), static_cast<double>(s.out_of_time),
                          static_cast<double>(s.correct)},
                         torch::kDouble);
  group_.all_reduce_sum(t);
  return {t[0].item<double>(), t[1].item<double>(), static_cast<int64_t>(t[2].item<double>()),
          static_cast<int64_t>(t[3].item<double>()), static_cast<int64_t>(t[4].item<double>())};
}

void DataParallel::attach(const std::vector<torch::Tensor>& params, double bucket_cap_mb, bool broadcast) {
  if (broadcast) broadcast_parameters(params, group_);
  reducer_ = std::make_unique<GradientReducer>(params, group_, bucket_cap_mb);
}

int64_t DataParallel::last_owned(int64_t span) const {
  int64_t last = -1;
  for (int64_t j = 0; j < span; ++j)
    if (shard().owns(j)) last = j;
  return last;
}

void DataParallel::seed_streams(uint64_t seed, const model::TensorMap* saved) const {
  if (saved) {
    const auto rng = saved->find(rng_key(group_.rank()));
    if (rng != saved->end()) {
      auto generator = at::detail::getDefaultCPUGenerator();  // a handle of the global generator
      generator.set_state(rng->second);
      return;
    }
  }
  if (saved || group_.rank() > 0) torch::manual_seed(rank_seed(seed, group_.rank()));
}

void DataParallel::save_streams(model::TensorMap& extra) const {
  const auto streams = group_.all_gather(model::tensor_bytes(at::detail::getDefaultCPUGenerator().get_state()));
  for (size_t r = 0; r < streams.size(); ++r) extra[rng_key(static_cast<int>(r))] = model::bytes_tensor(streams[r]);
}

}  // namespace normlab::train
