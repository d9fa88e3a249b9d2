#include "analysis/hessian_blocks.h"

#include <algorithm>
#include <map>
#include <regex>

#include <torch/torch.h>

namespace normlab::analysis {

std::string parameter_block(const std::string& name) {
  static const std::regex layer(R"(^(encoder|decoder)\.layers\.(\d+)\.)");
  std::smatch m;
  if (std::regex_search(name, m, layer)) return m[1].str() + ".layers." + m[2].str();
  if (name.find("embed_tokens") != std::string::npos || name.find("output_projection") != std::string::npos)
    return "embeddings";
  return "other";
}

std::string sublayer_block(const std::string& name) {
  const auto layer = parameter_block(name);
  if (layer == "embeddings" || layer == "other") return layer;
  static const std::regex attention(R"(\.layers\.\d+\.(self_attn|encoder_attn)\.([a-z]+)_(proj|norm)\.)");
  std::smatch m;
  if (std::regex_search(name, m, attention)) {
    const auto which = m[2].str();
    return layer + "." + m[1].str() + (which == "q" || which == "k" ? ".qk" : ".vo");
  }
  if (name.find(".fc1.") != std::string::npos || name.find(".fc2.") != std::string::npos) return layer + ".ffn";
  return layer + ".norms";
}

std::vector<ParameterBlock> parameter_blocks(const FullDataHessian& h,
                                             const std::function<std::string(const std::string&)>& block_of) {
  std::vector<ParameterBlock> blocks;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < h.params().size(); ++i) {
    const auto name = block_of(h.params()[i].first);
    auto [it, fresh] = index.emplace(name, blocks.size());
    if (fresh) blocks.push_back({name, {}, 0});
    auto& b = blocks[it->second];
    const int64_t n = h.params()[i].second.numel();
    b.ranges.emplace_back(h.offset(i), n);
    b.size += n;
  }
  return blocks;
}

TridiagonalEigen block_spectrum(const LinearOperator& hvp, int64_t dim, const ParameterBlock& block,
                                int64_t steps, uint64_t seed, torch::Dtype dtype) {
  // The operator restricted to the block: scatter into the full vector, gather the product.
  const LinearOperator op = [&](const torch::Tensor& u) {
    auto full = torch::zeros({dim}, u.options());
    int64_t at = 0;
    for (const auto& [offset, length] : block.ranges) {
      full.narrow(0, offset, length).copy_(u.narrow(0, at, length));
      at += length;
    }
    auto hv = hvp(full);
    std::vector<torch::Tensor> parts;
    for (const auto& [offset, length] : block.ranges) parts.push_back(hv.narrow(0, offset, length));
    return torch::cat(parts);
  };
  auto s = lanczos_start(rademacher(block.size, seed, dtype));
  lanczos_continue(op, std::min(steps, block.size), s);
  return tridiagonal_eigen(s.alpha, s.beta);
}

}  // namespace normlab::analysis
