#include "analysis/sites.h"

#include <cmath>
#include <cstdio>

#include <torch/torch.h>

#include "core/tokens.h"

namespace normlab::analysis {

namespace {
std::string norm_name(const std::string& block) { return model::block_names(block).norm; }
}  // namespace

std::vector<BlockSite> block_sites(model::Model net) {
  std::vector<BlockSite> out;
  for (const auto& stack : net->stacks()) {
    for (size_t i = 0; i < stack.layers.size(); ++i) {
      const auto& blocks = stack.layers[i].blocks;
      for (const auto& [name, block] : blocks) {
        const bool ffn = name == "ffn";
        out.push_back({stack.name, static_cast<int64_t>(i), norm_name(name), block, ffn,
                       ffn && i + 1 == stack.layers.size(), name});
      }
    }
  }
  return out;
}

void clear_observers(model::Model net) {
  for (auto& s : block_sites(net)) s.block->set_observer(nullptr);
}

ParamSite param_site(const std::string& name) {
  if (name.find("embed_tokens") != std::string::npos || name.find("output_projection") != std::string::npos)
    return {"embedding", -1};
  const auto dot = name.find('.');
  const std::string stack = name.substr(0, dot);
  const std::string layers = stack + ".layers.";
  if (name.rfind(layers, 0) != 0) return {stack, -1};
  return {stack, std::stoll(name.substr(layers.size()))};
}

torch::Tensor token_weights(const torch::Tensor& tokens) {
  return tokens.ne(kPad).to(torch::kFloat64);
}

torch::Tensor real_rows(const torch::Tensor& x, const torch::Tensor& weights) {
  return x.reshape({-1, x.size(-1)}).index({weights.reshape({-1}).to(x.device()).gt(0)});
}

std::pair<double, double> mean_and_sd(const std::vector<double>& values) {
  const auto n = static_cast<double>(values.size());
  double mean = 0.0, ss = 0.0;
  for (double v : values) mean += v / n;
  for (double v : values) ss += (v - mean) * (v - mean);
  return {mean, values.size() > 1 ? std::sqrt(ss / (n - 1.0)) : 0.0};
}

std::string csv_number(double v) {
  if (std::isnan(v)) return "";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace normlab::analysis
