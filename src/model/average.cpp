#include "model/average.h"

#include <stdexcept>

#include <torch/torch.h>

#include "model/checkpoint.h"

namespace normlab::model {
namespace {

// Both checkpoints hold the same vocabulary, or neither holds one.
bool same_vocab(const LoadedModel& a, const LoadedModel& b) {
  const auto va = a.extra_tensors.find(kVocabTensor), vb = b.extra_tensors.find(kVocabTensor);
  const bool a_has = va != a.extra_tensors.end(), b_has = vb != b.extra_tensors.end();
  return a_has == b_has && (!a_has || torch::equal(va->second, vb->second));
}

}  // namespace

void average_checkpoints(const std::vector<std::string>& inputs, const std::string& out) {
  if (inputs.empty()) throw std::invalid_argument("no checkpoints to average");
  LoadedModel first = load_model(inputs[0]);
  const auto vocab = first.extra_tensors.find(kVocabTensor);
  auto sum = named_parameters(first.model);
  torch::NoGradGuard no_grad;
  for (size_t i = 1; i < inputs.size(); ++i) {
    LoadedModel next = load_model(inputs[i]);
    if (next.meta.at("model") != first.meta.at("model"))
      throw std::invalid_argument(inputs[i] + ": another model configuration than " + inputs[0] + "'s");
    if (!same_vocab(first, next)) throw std::invalid_argument(inputs[i] + ": another vocabulary than " + inputs[0] + "'s");
    for (const auto& [name, p] : named_parameters(next.model)) sum.at(name).add_(p);
  }
  // fairseq divides floating-point parameters by the count (integer ones it floor-divides;
  // normlab has none).
  for (auto& [name, p] : sum) p.div_(static_cast<double>(inputs.size()));

  nlohmann::json meta = {{"averaged_from", inputs}};
  if (first.meta.contains("config")) meta["config"] = first.meta["config"];
  TensorMap extra;
  if (vocab != first.extra_tensors.end()) extra[kVocabTensor] = vocab->second;
  save_model(out, first.model, meta, extra);
}

}  // namespace normlab::model
