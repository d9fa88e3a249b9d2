#include "analysis/probe.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>
#include <type_traits>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "analysis/curvature.h"
#include "analysis/hvp.h"
#include "analysis/lanczos.h"
#include "analysis/ln_jacobian.h"
#include "analysis/sites.h"
#include "core/file_io.h"
#include "core/problems.h"
#include "core/tokens.h"
#include "data/vocab.h"
#include "model/decoder_only.h"
#include "model/encoder_only.h"
#include "model/model.h"
#include "model/seq2seq.h"
#include "model/width.h"
#include "train/criterion.h"

namespace normlab::analysis {
namespace {

using Clock = std::chrono::steady_clock;
using Key = std::tuple<std::string, int64_t, std::string>;  // stack, layer, name
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Values per key and seed, keys in first-seen order.
class SeedTable {
 public:
  void add(const Key& k, std::vector<double> columns) {
    auto [it, fresh] = index_.emplace(k, rows_.size());
    if (fresh) rows_.push_back({k, {}});
    rows_[it->second].second.push_back(std::move(columns));
  }
  // Each key with the mean and the sample standard deviation of every column over seeds.
  template <typename F>
  void for_each(F&& f) const {
    for (const auto& [key, seeds] : rows_) {
      std::vector<double> mean, sd;
      for (size_t j = 0; j < seeds.front().size(); ++j) {
        std::vector<double> column;
        for (const auto& s : seeds) column.push_back(s[j]);
        const auto [m, d] = mean_and_sd(column);
        mean.push_back(m);
        sd.push_back(d);
      }
      f(key, mean, sd);
    }
  }

 private:
  std::map<Key, size_t> index_;
  std::vector<std::pair<Key, std::vector<std::vector<double>>>> rows_;
};

// A double through JSON exactly: finite numbers as numbers (nlohmann writes them so that they
// read back bit for bit), NaN and infinities as strings (JSON has no such numbers).
nlohmann::json exact(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}
double exact(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  const auto s = j.get<std::string>();
  return s == "nan" ? kNaN : (s == "inf" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity());
}
nlohmann::json exact(const std::vector<double>& v) {
  auto out = nlohmann::json::array();
  for (double x : v) out.push_back(exact(x));
  return out;
}
std::vector<double> exact_vector(const nlohmann::json& j) {
  std::vector<double> out;
  for (const auto& x : j) out.push_back(exact(x));
  return out;
}

// per_seed(s) for s = 0 .. seeds-1, split across the ranks of `group` (rank r takes the seeds
// s = r mod WORLD_SIZE), every seed's result on every rank in seed order: each seed's work does
// not depend on another's, so the results equal one process's bit for bit.
std::vector<nlohmann::json> over_seeds(int64_t seeds, core::ProcessGroup& group,
                                       const std::function<nlohmann::json(int64_t)>& per_seed) {
  nlohmann::json mine = nlohmann::json::object();
  for (int64_t s = group.rank(); s < seeds; s += group.size()) mine[std::to_string(s)] = per_seed(s);
  std::vector<nlohmann::json> out(static_cast<size_t>(seeds));
  if (group.size() == 1) {
    for (int64_t s = 0; s < seeds; ++s) out[static_cast<size_t>(s)] = std::move(mine[std::to_string(s)]);
    return out;
  }
  for (const auto& bytes : group.all_gather(mine.dump())) {
    const auto theirs = nlohmann::json::parse(bytes);
    for (const auto& [k, v] : theirs.items()) out.at(std::stoul(k)) = v;
  }
  return out;
}

// One mini-batch: token ids, or (analysis setting) Gaussian inputs x0 (B,T,C) and targets.
struct ProbeBatch {
  data::Batch tokens;
  torch::Tensor x0, target;
  torch::Tensor y0;  // the decoder's own inputs (B,T,C) under --analysis-stack decoder of an encoder-decoder
};

// The stack whose last layer the sweep reads: the encoder of a model that has one (Xiong's
// setting), else a decoder-only model's decoder (causal self-attention).
std::string analysis_stack_name(const model::ModelConfig& m) { return m.has_encoder() ? "encoder" : "decoder"; }

// `layers` layers in the stack that the analysis setting and the sweep look at (an
// encoder-decoder's encoder; a single-stack model's one stack).
void set_stack_layers(model::ModelConfig& m, int64_t layers) {
  (m.has_encoder() ? m.encoder_layers : m.decoder_layers) = layers;
}

model::ModelConfig scheme_config(const ProbeConfig& c, const std::string& scheme, int64_t vocab) {
  auto m = c.model;
  m.scheme = c.overrides.apply(model::scheme_by_name(scheme));
  m.src_vocab_size = m.tgt_vocab_size = vocab;
  if (c.analysis_setting || c.sweep) {
    m.heads = 1;
    m.ffn_dim = m.d_model;
    m.dropout = m.attention_dropout = m.activation_dropout = 0.0;
    // Unused unless --analysis-stack decoder: the encoder stack alone is the model.
    if (m.kind == model::kEncoderDecoder && !c.cross_attention_analysis()) m.decoder_layers = 1;
  }
  return m;
}

// The parts of an analysis stack that the setting reads.
struct AnalysisStack {
  std::string name;  // the stack's name in the sites and files
  torch::nn::ModuleList layers{nullptr};
  model::Norm final_norm{nullptr};
  torch::Tensor readout;  // W^emb (V,C): the stack's token table
  bool causal = false;
};

// The stacks the analysis setting runs, in order: one, or with `cross_attention` an
// encoder-decoder's encoder and then its decoder, whose cross-attention reads the encoder's output.
std::vector<AnalysisStack> analysis_stacks(const model::Model& net, bool cross_attention) {
  if (auto ed = std::dynamic_pointer_cast<model::Seq2SeqImpl>(net.ptr())) {
    const auto& e = ed->encoder;
    const auto& d = ed->decoder;
    AnalysisStack encoder{"encoder", e->layers, e->layer_norm, e->embed_tokens->weight};
    if (!cross_attention) return {encoder};
    return {encoder, {"decoder", d->layers, d->layer_norm, d->embed_tokens->weight, true}};
  }
  if (auto eo = std::dynamic_pointer_cast<model::EncoderOnlyImpl>(net.ptr()))
    return {{"encoder", eo->encoder->layers, eo->encoder->layer_norm, eo->encoder->embed_tokens->weight}};
  auto d = model::as_decoder_only(net, "the analysis setting");
  return {{"decoder", d->decoder->layers, d->decoder->layer_norm, d->decoder->embed_tokens->weight, true}};
}

// Xiong §3.3: Xavier normal N(0, 2/(n_in+n_out)) for every matrix (W^V too: no fused gain),
// W^Q = W^K = 0, zero biases. Embeddings (W^emb of the softmax) keep initialize()'s N(0, 1/C).
void analysis_init_linear(torch::nn::Linear& lin) {
  const auto fan = static_cast<double>(lin->weight.size(0) + lin->weight.size(1));
  lin->weight.normal_(0.0, std::sqrt(2.0 / fan));
  lin->bias.zero_();
}

// Its projections drawn in the order q, k, v, out; then W^Q = W^K = 0 (uniform attention).
void analysis_init_attention(model::MultiheadAttention& a) {
  for (auto* lin : {&a->q_proj, &a->k_proj, &a->v_proj, &a->out_proj}) analysis_init_linear(*lin);
  a->q_proj->weight.zero_();
  a->k_proj->weight.zero_();
}

// The self-attention and the FFN; a decoder layer's cross-attention after them (the draws of
// the layers without one are those of the setting before cross-attention was added).
template <typename Layer>
void analysis_init_layer(Layer& l) {
  analysis_init_attention(l.self_attn);
  analysis_init_linear(l.fc1);
  analysis_init_linear(l.fc2);
  if constexpr (std::is_same_v<Layer, model::DecoderLayerImpl>)
    if (l.encoder_attn) analysis_init_attention(l.encoder_attn);
}

void analysis_init(const model::Model& net, bool cross_attention) {
  torch::NoGradGuard no_grad;
  for (const auto& stack : analysis_stacks(net, cross_attention))
    for (const auto& m : *stack.layers) {
      if (stack.causal) analysis_init_layer(*m->as<model::DecoderLayerImpl>());
      else analysis_init_layer(*m->as<model::EncoderLayerImpl>());
    }
}

std::vector<ProbeBatch> make_probe_batches(const ProbeConfig& c, const BatchSource& source,
                                           uint64_t seed) {
  std::vector<ProbeBatch> out;
  if (!(c.analysis_setting || c.sweep)) {
    for (auto& b : source.batches(seed, c.batches)) out.push_back({std::move(b), {}, {}});
    return out;
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto& in = c.inputs;
  for (int64_t i = 0; i < c.batches; ++i) {
    ProbeBatch b;
    b.x0 = torch::randn({in.sentences, in.length, c.model.d_model}, gen, torch::kFloat32);
    b.target = torch::randint(kNumSpecialTokens, source.vocab_size(), {in.sentences, in.length}, gen, torch::kInt64);
    if (c.cross_attention_analysis())
      b.y0 = torch::randn({in.sentences, in.length, c.model.d_model}, gen, torch::kFloat32);
    out.push_back(std::move(b));
  }
  return out;
}

// Mean loss per target token of one batch (the gradient the trainer steps with).
torch::Tensor batch_loss(model::Model net, const ProbeBatch& b, double eps) {
  if (b.x0.defined()) {
    auto guard = net->precision_guard();
    const auto stacks = analysis_stacks(net, b.y0.defined());
    auto mask = torch::zeros({b.x0.size(0), b.x0.size(1)}, torch::kBool);  // no padding
    torch::Tensor x, memory;  // memory: the encoder's output, read by a decoder's cross-attention
    for (const auto& stack : stacks) {
      x = memory.defined() ? b.y0 : b.x0;  // (B,T,C)
      const auto memory_mask = memory.defined() ? mask : torch::Tensor();
      for (const auto& layer : *stack.layers)
        x = stack.causal ? layer->as<model::DecoderLayerImpl>()->forward(x, mask, memory, memory_mask)
                         : layer->as<model::EncoderLayerImpl>()->forward(x, mask);
      if (stack.final_norm) x = stack.final_norm->forward(x);
      memory = x;
    }
    auto logits = torch::linear(x, stacks.back().readout);  // (B,T,V)
    auto s = train::label_smoothed_nll(logits, b.target, 0.0, train::LabelSmoothingFormula::kUniform, kPad);
    return s.loss / static_cast<double>(s.tokens);
  }
  const auto s = train::loss(net, b.tokens, train::LossOptions{eps}).sums;
  return s.loss / static_cast<double>(s.tokens);
}

model::Model fresh_model(const ProbeConfig& c, const model::ModelConfig& m, uint64_t seed, const ProbeBatch& first) {
  // Xiong et al.'s quantities are of every stack (their analysis setting: the encoder's alone).
  auto net = model::create_model(m);
  model::initialize(net, seed, first.x0.defined() ? nullptr : &first.tokens);
  if (c.analysis_setting || c.sweep) analysis_init(net, c.cross_attention_analysis());
  if (c.dropout && !(c.analysis_setting || c.sweep)) net->train(); else net->eval();
  net->set_precision(c.precision);
  return net;
}

// What the block observers gather during one initialisation.
struct Observed {
  std::map<std::string, torch::Tensor> weights;  // per stack: (B,T) token weights of the current batch
  bool jacobian = false;       // on the first batch only
  int64_t jacobian_tokens = 0, iterations = 0;
  std::map<Key, std::pair<double, double>> hidden;  // sum of ||x||^2/C, tokens
  std::vector<Key> hidden_order;
  std::vector<std::pair<Key, std::vector<double>>> ln;  // input_norm, jacobian_norm, sqrt_d_over_norm

  void add_square_norms(const Key& k, const torch::Tensor& x, const torch::Tensor& w) {
    auto sq = x.detach().to(torch::kFloat64).pow(2).sum(-1) / static_cast<double>(x.size(-1));  // (B,T)
    auto [it, fresh] = hidden.emplace(k, std::make_pair(0.0, 0.0));
    if (fresh) hidden_order.push_back(k);
    it->second.first += (sq * w).sum().item<double>();
    it->second.second += w.sum().item<double>();
  }
  void add_jacobian(const Key& k, const model::Norm& norm, const torch::Tensor& x, const torch::Tensor& w) {
    auto rows = real_rows(x.detach(), w);
    rows = rows.slice(0, 0, std::min<int64_t>(rows.size(0), jacobian_tokens));
    ln.push_back({k,
                  {rows.to(torch::kFloat64).norm(2, {1}).mean().item<double>(),
                   norm_jacobian_norms(norm, rows, iterations).mean().item<double>(),
                   closed_form_jacobian_norm(norm->kind(), rows)}});
  }
  // Xiong's sqrt(C)/||x - mean|| for LayerNorm, sqrt(C)/||x|| for RMSNorm (ln_jacobian.h),
  // none for DyT (its Jacobian, diag(gamma alpha sech^2(alpha x)), has no such form).
  static double closed_form_jacobian_norm(model::NormKind kind, const torch::Tensor& rows) {
    switch (kind) {
      case model::NormKind::kLayerNorm: return sqrt_d_over_centered_norm(rows).mean().item<double>();
      case model::NormKind::kRMSNorm: return sqrt_d_over_norm(rows).mean().item<double>();
      case model::NormKind::kDyT: break;
    }
    return kNaN;
  }
};

void install_observers(model::Model net, Observed& obs) {
  std::map<std::string, model::Norm> final_norms;
  for (const auto& stack : net->stacks()) final_norms.emplace(stack.name, stack.final_norm);
  for (const auto& site : block_sites(net)) {
    const model::Norm final_norm = final_norms.at(site.stack);
    const model::Norm norm = site.block->norm();
    const auto placement = site.block->placement();
    site.block->set_observer([&obs, site, placement, final_norm, norm](const char* what, const torch::Tensor& x) {
      const auto& w = obs.weights.at(site.stack);
      if (std::string(what) == "ln_input") {
        obs.add_square_norms({site.stack, site.layer, site.ln + "_input"}, x, w);
        // Lemma 2, Post-LN: x^{post,5}_l, the input of the layer's last LayerNorm.
        if (placement == model::NormPlacement::kPost && site.ffn)
          obs.add_square_norms({site.stack, site.layer, "x_post5"}, x, w);
        if (obs.jacobian) obs.add_jacobian({site.stack, site.layer, site.ln}, norm, x, w);
      } else if (std::string(what) == "output" &&
                 (placement == model::NormPlacement::kPre || placement == model::NormPlacement::kPeri) && site.ffn) {
        // Lemma 2, Pre-LN: x^{pre}_{l+1}, the residual stream after layer l (0-based); the
        // same stream of Peri-LN.
        obs.add_square_norms({site.stack, site.layer, "x_pre"}, x, w);
        if (site.last && obs.jacobian) obs.add_jacobian({site.stack, -1, "layer_norm"}, final_norm, x, w);
      }
    });
  }
}

// Xiong Lemma 2 in units of C, E||x||^2/C in the analysis setting, for layer index `layer`
// (0-based) of a stack of `layers`, and its analogues for the schemes of REFERENCE §10
// (docs/probe.md derives them): {value, lower, upper}, NaN where nothing is predicted.
//   x_post5 (Post-LN, and Mix-LN's post layers): 3/2; the norm's output has ||x||^2 = C for
//     LayerNorm and RMSNorm alike (not DyT).
//   x_pre (the stream after layer l, l = layer + 1): Pre-LN 1 + l/2 .. 1 + 3l/2, each layer
//     adding C/2 .. 3C/2; with LayerNorm scaling layer k's norms give 1/k of that:
//     1 + H_l/2 .. 1 + 3 H_l/2 (H_l the harmonic number); Mix-LN's pre layers start from a
//     normalised stream after floor(alpha L) post layers: 1 + (l - k0)/2 .. 1 + 3(l - k0)/2;
//     Peri-LN adds the output norm's C exactly twice per layer (the cross term has mean 0, the
//     norm being odd in its input): 1 + 2l, linear in depth.
//   The x_pre bounds hold for any stack without cross-attention: Xiong's proof (Appendix C,
//     eqs. 14-19) uses only ||LN(x)||^2 = C, W^V independent of the stream with mean 0, and the
//     attention output being a convex combination of the normalised rows, which causal
//     attention's average over positions 0..t is too.
//   An encoder-decoder's decoder (cross_attention) has a third sublayer per layer. By the same
//     argument it adds [0, C]: a convex combination of the encoder's output rows, each of squared
//     norm C (its last norm's output), through W^V W^O independent of the stream. The query's
//     norm does not reach it (W^Q = 0), so LayerNorm scaling does not shrink it. Pre-LN:
//     1 + l/2 .. 1 + 5l/2; with LayerNorm scaling 1 + H_l/2 .. 1 + 3 H_l/2 + l; Mix-LN's pre
//     layers 1 + n/2 .. 1 + 5n/2; Peri-LN adds C three times per layer: 1 + 3l.
std::array<double, 3> lemma2(const model::SchemeSettings& s, int64_t layers, const std::string& quantity,
                             bool cross_attention, int64_t layer) {
  if (s.norm_kind == model::NormKind::kDyT) return {kNaN, kNaN, kNaN};
  if (quantity == "x_post5") return {1.5, 1.5, 1.5};
  if (quantity != "x_pre") return {kNaN, kNaN, kNaN};
  const double l = static_cast<double>(layer + 1);
  const double cross = cross_attention ? 1.0 : 0.0;  // the cross-attention's most per layer, in C
  switch (s.norm) {
    case model::NormPlacement::kPeri:
      return {1.0 + (2.0 + cross) * l, kNaN, kNaN};
    case model::NormPlacement::kMix: {
      int64_t post_layers = 0;
      while (post_layers < layers &&
             model::layer_placement(s, post_layers, layers) == model::NormPlacement::kPost)
        ++post_layers;
      const double n = l - static_cast<double>(post_layers);
      return {kNaN, 1.0 + n / 2.0, 1.0 + (1.5 + cross) * n};
    }
    case model::NormPlacement::kPre: {
      double steps = l;
      if (s.ln_scaling) {
        steps = 0.0;
        for (int64_t k = 1; k <= layer + 1; ++k) steps += 1.0 / static_cast<double>(k);
      }
      return {kNaN, 1.0 + steps / 2.0, 1.0 + 1.5 * steps + cross * l};
    }
    default:
      return {kNaN, kNaN, kNaN};
  }
}

struct SchemeTables {
  SeedTable grads, hidden, ln;
};

SchemeTables probe_scheme(const ProbeConfig& c, const std::string& scheme, const BatchSource& source,
                          core::ProcessGroup& group) {
  const auto m = scheme_config(c, scheme, source.vocab_size());
  auto key = [](const Key& k) { return nlohmann::json{std::get<0>(k), std::get<1>(k), std::get<2>(k)}; };
  const auto results = over_seeds(c.seeds, group, [&](int64_t s) {
    const uint64_t seed = c.seed + static_cast<uint64_t>(s);
    const auto batches = make_probe_batches(c, source, seed);
    auto net = fresh_model(c, m, seed, batches.front());
    Observed obs;
    obs.jacobian_tokens = c.jacobian_tokens;
    obs.iterations = c.power_iterations;
    install_observers(net, obs);
    std::vector<std::pair<std::string, torch::Tensor>> params;
    for (const auto& p : net->named_parameters()) params.emplace_back(p.key(), p.value());
    std::map<std::string, torch::Tensor> grad_sum;
    std::map<std::string, double> norm_sum;
    for (size_t b = 0; b < batches.size(); ++b) {
      const auto& batch = batches[b];
      if (batch.x0.defined()) {
        for (const auto& stack : analysis_stacks(net, batch.y0.defined()))
          obs.weights[stack.name] = torch::ones({batch.x0.size(0), batch.x0.size(1)}, torch::kFloat64);
      } else {
        for (const auto& stack : net->stacks()) obs.weights[stack.name] = token_weights(batch.tokens.*stack.tokens);
      }
      obs.jacobian = b == 0;
      net->zero_grad();
      batch_loss(net, batch, c.label_smoothing).backward();
      for (const auto& [name, p] : params) {
        if (!p.grad().defined()) continue;
        auto g = p.grad().to(torch::kFloat64);
        norm_sum[name] += g.norm().item<double>();
        auto [it, fresh] = grad_sum.emplace(name, g.clone());
        if (!fresh) it->second += g;
      }
    }
    clear_observers(net);
    const double n = static_cast<double>(batches.size());
    nlohmann::json r = {{"grads", nlohmann::json::array()}, {"hidden", nlohmann::json::array()},
                        {"ln", nlohmann::json::array()}};
    for (const auto& [name, p] : params) {
      auto it = grad_sum.find(name);
      if (it == grad_sum.end()) continue;
      const auto site = param_site(name);
      // Xiong §3.3: ||E_batches[dL/dW]||_F, and E_batches ||dL/dW||_F beside it.
      r["grads"].push_back({key({site.stack, site.layer, name}),
                            exact(std::vector<double>{(it->second / n).norm().item<double>(), norm_sum[name] / n})});
    }
    for (const auto& k : obs.hidden_order) {
      const auto& [sum, count] = obs.hidden.at(k);
      r["hidden"].push_back({key(k), exact(std::vector<double>{sum / count})});
    }
    for (const auto& [k, v] : obs.ln) r["ln"].push_back({key(k), exact(v)});
    std::cerr << "  " << scheme << ": seed " << seed << " done (" << s + 1 << "/" << c.seeds << ")\n";
    return r;
  });
  SchemeTables t;
  for (const auto& r : results)
    for (auto [table, name] : {std::make_pair(&t.grads, "grads"), std::make_pair(&t.hidden, "hidden"),
                               std::make_pair(&t.ln, "ln")})
      for (const auto& row : r.at(name))
        table->add({row[0][0].get<std::string>(), row[0][1].get<int64_t>(), row[0][2].get<std::string>()},
                   exact_vector(row[1]));
  return t;
}

void write_probe(const ProbeConfig& c, const nlohmann::json& config_json, const BatchSource& source,
                 core::ProcessGroup& group) {
  std::ostringstream grads, hidden, ln;
  grads << "scheme,stack,layer,param,expected_grad_norm_mean,expected_grad_norm_std,mean_grad_norm_mean,"
           "mean_grad_norm_std\n";
  hidden << "scheme,stack,layer,quantity,value_mean,value_std,lemma_value,lemma_lower,lemma_upper\n";
  ln << "scheme,stack,layer,ln,input_norm,jacobian_norm,sqrt_d_over_norm\n";
  nlohmann::json summary = nlohmann::json::object();
  for (const auto& scheme : c.schemes) {
    const auto start = Clock::now();
    std::cerr << "normlab probe: " << scheme << "\n";
    const auto t = probe_scheme(c, scheme, source, group);
    const auto m = scheme_config(c, scheme, source.vocab_size());
    nlohmann::json s;
    std::map<std::pair<std::string, int64_t>, std::array<double, 2>> ffn;  // fc1, fc2 expected
    t.grads.for_each([&](const Key& k, const std::vector<double>& mean, const std::vector<double>& sd) {
      const auto& [stack, layer, name] = k;
      grads << scheme << "," << stack << "," << layer << "," << name << "," << csv_number(mean[0]) << "," << csv_number(sd[0])
            << "," << csv_number(mean[1]) << "," << csv_number(sd[1]) << "\n";
      const bool fc1 = name.find(".fc1.weight") != std::string::npos, fc2 = name.find(".fc2.weight") != std::string::npos;
      if (fc1 || fc2) {
        ffn[{stack, layer}][fc1 ? 0 : 1] = mean[0];
        s["fig3_expected_grad_norm"][stack][fc1 ? "fc1.weight" : "fc2.weight"].push_back(mean[0]);
      }
    });
    std::map<std::pair<std::string, int64_t>, std::array<double, 4>> lemma;  // value, lemma, lo, hi
    t.hidden.for_each([&](const Key& k, const std::vector<double>& mean, const std::vector<double>& sd) {
      const auto& [stack, layer, quantity] = k;
      const bool decoder = stack == "decoder";
      const auto l = lemma2(m.scheme, decoder ? m.decoder_layers : m.encoder_layers, quantity,
                            decoder && m.has_encoder(), layer);
      hidden << scheme << "," << stack << "," << layer << "," << quantity << "," << csv_number(mean[0]) << ","
             << csv_number(sd[0]) << "," << csv_number(l[0]) << "," << csv_number(l[1]) << "," << csv_number(l[2]) << "\n";
      if (quantity == "x_post5" || quantity == "x_pre") {
        lemma[{stack, layer}] = {mean[0], l[0], l[1], l[2]};
        s["lemma2"][stack][quantity].push_back(mean[0]);
      }
    });
    t.ln.for_each([&](const Key& k, const std::vector<double>& mean, const std::vector<double>&) {
      const auto& [stack, layer, name] = k;
      ln << scheme << "," << stack << "," << layer << "," << name << "," << csv_number(mean[0]) << "," << csv_number(mean[1])
         << "," << csv_number(mean[2]) << "\n";
    });
    s["wall_s"] = std::chrono::duration<double>(Clock::now() - start).count();
    summary[scheme] = s;
    // The Fig. 3 / Lemma 2 table on stderr.
    std::fprintf(stderr, "%-8s %5s %14s %14s %12s %16s\n", "stack", "layer", "E-grad fc1", "E-grad fc2",
                 "E||x||^2/C", "Lemma 2");
    for (const auto& [where, f] : ffn) {
      const auto it = lemma.find(where);
      std::string bound = "";
      double value = kNaN;
      if (it != lemma.end()) {
        value = it->second[0];
        if (!std::isnan(it->second[1])) bound = csv_number(it->second[1]);
        else if (!std::isnan(it->second[2])) bound = "[" + csv_number(it->second[2]) + ", " + csv_number(it->second[3]) + "]";
      }
      std::fprintf(stderr, "%-8s %5lld %14.6g %14.6g %12.5g %16s\n", where.first.c_str(),
                   static_cast<long long>(where.second), f[0], f[1], value, bound.c_str());
    }
  }
  if (!group.is_main()) return;  // rank 0 writes OUT
  const std::filesystem::path out(c.out);
  std::filesystem::create_directories(out);
  core::write_file_atomic((out / "grad_norms.csv").string(), grads.str());
  core::write_file_atomic((out / "hidden_norms.csv").string(), hidden.str());
  core::write_file_atomic((out / "ln_jacobian.csv").string(), ln.str());
  nlohmann::json j = {{"config", config_json}, {"vocab_size", source.vocab_size()}, {"schemes", summary}};
  core::write_file_atomic((out / "probe.json").string(), j.dump(2) + "\n");
}

// Theorem 1: ||dL/dW^{2,L}||_F of the last FFN weight against L and C.
void write_sweep(const ProbeConfig& c, const nlohmann::json& config_json, const BatchSource& source,
                 core::ProcessGroup& group) {
  std::ostringstream csv;
  csv << "scheme,layers,d_model,seed,grad_norm\n";
  nlohmann::json slopes = nlohmann::json::object();
  const int64_t d0 = c.model.d_model, l0 = c.model.stack_layers();
  std::vector<std::pair<int64_t, int64_t>> points;  // (L, C)
  for (auto l : c.sweep_layers) points.push_back({l, d0});
  for (auto d : c.sweep_d)
    if (std::find(points.begin(), points.end(), std::make_pair(l0, d)) == points.end()) points.push_back({l0, d});
  for (const auto& scheme : c.schemes) {
    std::vector<double> lx, ly, dx, dy;
    for (const auto& [layers, d] : points) {
      auto pc = c;
      set_stack_layers(pc.model, layers);
      pc.model.d_model = d;
      const auto m = scheme_config(pc, scheme, source.vocab_size());
      const std::string name = analysis_stack_name(m) + ".layers." + std::to_string(layers - 1) + ".fc2.weight";
      const auto results = over_seeds(c.seeds, group, [&](int64_t s) {
        const uint64_t seed = c.seed + static_cast<uint64_t>(s);
        const auto batches = make_probe_batches(pc, source, seed);
        auto net = fresh_model(pc, m, seed, batches.front());
        auto w = net->named_parameters()[name];
        double sum = 0.0;
        for (const auto& b : batches) {
          net->zero_grad();
          batch_loss(net, b, 0.0).backward();
          sum += w.grad().to(torch::kFloat64).norm().item<double>();
        }
        return exact(sum / static_cast<double>(batches.size()));
      });
      for (int64_t s = 0; s < c.seeds; ++s) {
        const uint64_t seed = c.seed + static_cast<uint64_t>(s);
        const double g = exact(results[static_cast<size_t>(s)]);
        csv << scheme << "," << layers << "," << d << "," << seed << "," << csv_number(g) << "\n";
        if (d == d0) lx.push_back(static_cast<double>(layers)), ly.push_back(g);
        if (layers == l0) dx.push_back(static_cast<double>(d)), dy.push_back(g);
      }
      std::cerr << "  " << scheme << ": L=" << layers << " C=" << d << " done\n";
    }
    // Theorem 1: Post-LN O(C sqrt(ln C)), independent of L; Pre-LN O(C sqrt(ln C / L)).
    std::vector<double> theory_d;
    for (auto d : dx) theory_d.push_back(d * std::sqrt(std::log(d)));
    // Theorem 1 is about Post-LN and Pre-LN (LayerNorm, no scaling); no slope for the others.
    const auto settings = c.overrides.apply(model::scheme_by_name(scheme));
    const bool layernorm = settings.norm_kind == model::NormKind::kLayerNorm && !settings.ln_scaling;
    double theory_layers = kNaN;
    if (layernorm && settings.norm == model::NormPlacement::kPre) theory_layers = -0.5;
    if (layernorm && settings.norm == model::NormPlacement::kPost) theory_layers = 0.0;
    slopes[scheme] = {{"slope_layers", lx.size() > 1 ? log_log_slope(lx, ly) : kNaN},
                      {"slope_d", dx.size() > 1 ? log_log_slope(dx, dy) : kNaN},
                      {"theory_slope_layers", theory_layers},
                      {"theory_slope_d", dx.size() > 1 ? log_log_slope(dx, theory_d) : kNaN},
                      {"d_model_of_layer_sweep", d0},
                      {"layers_of_d_sweep", l0}};
    std::fprintf(stderr, "%s: slope vs L %.3f (theory %.1f), slope vs C %.3f (theory %.3f)\n", scheme.c_str(),
                 slopes[scheme]["slope_layers"].get<double>(), theory_layers,
                 slopes[scheme]["slope_d"].get<double>(), slopes[scheme]["theory_slope_d"].get<double>());
  }
  if (!group.is_main()) return;  // rank 0 writes OUT
  const std::filesystem::path out(c.out);
  std::filesystem::create_directories(out);
  core::write_file_atomic((out / "sweep.csv").string(), csv.str());
  core::write_file_atomic((out / "sweep.json").string(), slopes.dump(2) + "\n");
  nlohmann::json j = {{"config", config_json}, {"sweep", slopes}};
  core::write_file_atomic((out / "probe.json").string(), j.dump(2) + "\n");
}

// --critical-lr (Kalra & Barkeshli 2024, REFERENCE §9): per scheme and seed, on the probe
// batches with dropout off, the critical learning rate of SGD and of Adam (betas 0.9,0.98, eps
// 1e-8, no weight decay) beside the bound the curvature at initialisation puts on a stable
// step: 2/lambda_1(H) for SGD, 38/lambda_1(P^-1 H) for Adam with the P of its first step
// (curvature.h, kNext: (|g| + eps)(1 - beta1)).
void write_critical_lr(const ProbeConfig& c, const nlohmann::json& config_json, const BatchSource& source,
                       core::ProcessGroup& group) {
  std::ostringstream csv;
  csv << "scheme,seed,optimizer,lr_c,bracketed,curvature,curvature_bound\n";
  nlohmann::json summary = nlohmann::json::object();
  train::OptimizerConfig sgd, adam;
  sgd.kind = train::OptimizerKind::kSgd;
  adam.kind = train::OptimizerKind::kAdam;
  for (const auto& scheme : c.schemes) {
    const auto m = scheme_config(c, scheme, source.vocab_size());
    std::map<std::string, std::vector<double>> lrs, bounds;
    const auto results = over_seeds(c.seeds, group, [&](int64_t s) {
      const uint64_t seed = c.seed + static_cast<uint64_t>(s);
      auto batches = source.batches(seed, c.batches);
      auto net = fresh_model(c, m, seed, {batches.front(), {}, {}});
      FullDataHessian h(net, std::move(batches), train::LossOptions{c.label_smoothing}, ".*", torch::kCPU);
      const auto gradient = h.gradient().first.clone();
      const auto grads = parameter_views(h, gradient);
      const auto loss = [&] { return h.loss(); };
      const LinearOperator hvp = [&](const torch::Tensor& v) { return h.hvp(v); };
      const double sharpness = largest_eigenvalue(hvp, rademacher(h.dim(), seed, h.dtype()), c.lanczos_steps).value;
      const double pre = first_step_preconditioned_sharpness(h, adam, gradient, rademacher(h.dim(), seed + 1, h.dtype()),
                                                             c.lanczos_steps);
      nlohmann::json r = nlohmann::json::array();
      for (const auto& [name, oc, curvature] : {std::make_tuple("sgd", sgd, sharpness), std::make_tuple("adam", adam, pre)}) {
        const auto lr_c = critical_lr(h.params(), grads, oc, loss, c.critical_lr_lo, c.critical_lr_hi, c.critical_lr_tol);
        const double bound = stability_threshold(oc, 1.0) / curvature;  // the lr whose threshold is `curvature`
        r.push_back({name, exact(lr_c.lr), lr_c.bracketed, exact(curvature), exact(bound)});
        std::fprintf(stderr, "  %s seed %llu %s: lr_c %.4g, curvature bound %.4g\n", scheme.c_str(),
                     static_cast<unsigned long long>(seed), name, lr_c.lr, bound);
      }
      return r;
    });
    for (int64_t s = 0; s < c.seeds; ++s)
      for (const auto& row : results[static_cast<size_t>(s)]) {
        const auto name = row[0].get<std::string>();
        const double lr = exact(row[1]), curvature = exact(row[3]), bound = exact(row[4]);
        csv << scheme << "," << c.seed + static_cast<uint64_t>(s) << "," << name << "," << csv_number(lr) << ","
            << (row[2].get<bool>() ? 1 : 0) << "," << csv_number(curvature) << "," << csv_number(bound) << "\n";
        lrs[name].push_back(lr);
        bounds[name].push_back(bound);
      }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
    };
    for (const char* name : {"sgd", "adam"})
      summary[scheme][name] = {{"median_lr_c", median(lrs[name])}, {"median_curvature_bound", median(bounds[name])}};
  }
  if (!group.is_main()) return;  // rank 0 writes OUT
  const std::filesystem::path out(c.out);
  std::filesystem::create_directories(out);
  core::write_file_atomic((out / "critical_lr.csv").string(), csv.str());
  nlohmann::json j = {{"config", config_json}, {"critical_lr", summary}};
  core::write_file_atomic((out / "probe.json").string(), j.dump(2) + "\n");
}

}  // namespace

std::vector<std::string> ProbeConfig::scheme_problems() const {
  std::vector<std::string> p;
  for (const auto& s : schemes) {
    try {
      const auto settings = overrides.apply(model::scheme_by_name(s));
      for (const auto& q : model::scheme_problems(settings)) p.push_back("--schemes " + s + ": " + q);
      if ((analysis_setting || sweep) && (settings.norm == model::NormPlacement::kNone ||
                                          settings.residual != model::ResidualForm::kPlain))
        p.push_back("--schemes " + s +
                    ": the analysis setting (and --sweep) is Xiong's, for schemes with norms and a plain residual");
    } catch (const std::invalid_argument& e) {
      p.push_back(e.what());
    }
  }
  return p;
}

std::vector<std::string> ProbeConfig::sweep_problems() const {
  std::vector<std::string> p;
  if (sweep_layers.empty() && sweep_d.empty()) p.push_back("--sweep needs --sweep-layers or --sweep-d");
  for (auto l : sweep_layers)
    if (l < 1) p.push_back("--sweep-layers: every depth must be >= 1, got " + std::to_string(l));
  for (auto d : sweep_d)
    if (d < 4 || d % 2) p.push_back("--sweep-d: every width must be even and >= 4, got " + std::to_string(d));
  return p;
}

std::vector<std::string> ProbeConfig::critical_lr_problems() const {
  std::vector<std::string> p;
  if (sweep || analysis_setting)
    p.push_back("--critical-lr runs on the full model's loss: not with --sweep or --analysis-setting");
  if (!(critical_lr_lo > 0 && critical_lr_hi > critical_lr_lo))
    p.push_back("--critical-lr-range: need 0 < LO < HI");
  if (!(critical_lr_tol > 0)) p.push_back("--critical-lr-tol must be > 0");
  if (lanczos_steps < 1) p.push_back("--lanczos-steps must be >= 1");
  if (precision != model::Precision::kFp32)
    p.push_back("--critical-lr measures curvature: it runs in fp32 (REFERENCE §7)");
  if (auto q = model::one_rate_problem(model, "--critical-lr")) p.push_back(*q);
  return p;
}

bool ProbeConfig::cross_attention_analysis() const {
  return analysis_setting && analysis_stack == "decoder" && model.kind == model::kEncoderDecoder;
}

std::vector<std::string> ProbeConfig::analysis_stack_problems() const {
  if (analysis_stack.empty()) return {};
  if (analysis_stack != "encoder" && analysis_stack != "decoder")
    return {"--analysis-stack: encoder or decoder, got '" + analysis_stack + "'"};
  if (!analysis_setting) return {"--analysis-stack needs --analysis-setting"};
  if (sweep)
    return {"--analysis-stack: --sweep reads the stack of Theorem 1 (the encoder, or a decoder-only model's decoder)"};
  if (analysis_stack == "encoder" && !model.has_encoder())
    return {"--analysis-stack encoder: the model has no encoder"};
  if (analysis_stack == "decoder" && !model.has_decoder())
    return {"--analysis-stack decoder: the model has no decoder"};
  return {};
}

std::vector<std::string> ProbeConfig::problems() const {
  std::vector<std::string> p;
  if (out.empty()) p.push_back("--out is required");
  if (schemes.empty()) p.push_back("--schemes is empty");
  for (auto& q : scheme_problems()) p.push_back(q);
  if (seeds < 1) p.push_back("--seeds must be >= 1, got " + std::to_string(seeds));
  if (batches < 1) p.push_back("--batches must be >= 1, got " + std::to_string(batches));
  if (power_iterations < 1) p.push_back("--power-iterations must be >= 1");
  if (jacobian_tokens < 1) p.push_back("--jacobian-tokens must be >= 1");
  if (!(label_smoothing >= 0 && label_smoothing < 1)) p.push_back("--label-smoothing must be in [0, 1)");
  if (sweep)
    for (auto& q : sweep_problems()) p.push_back(q);
  if (critical_lr)
    for (auto& q : critical_lr_problems()) p.push_back(q);
  for (auto& q : analysis_stack_problems()) p.push_back(q);
  if ((analysis_setting || sweep) && !inputs.train_prefix.empty())
    p.push_back("--train: the analysis setting (and --sweep) feeds Gaussian inputs, not a corpus");
  for (auto& q : inputs.problems()) p.push_back(q);
  for (auto& q : model::precision_problems(precision, torch::kCPU)) p.push_back(q);
  return p;
}

double log_log_slope(const std::vector<double>& x, const std::vector<double>& y) {
  const auto n = static_cast<double>(x.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double a = std::log(x[i]), b = std::log(y[i]);
    sx += a, sy += b, sxx += a * a, sxy += a * b;
  }
  return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

void run_probe(const ProbeConfig& c) {
  core::ProcessGroup one;
  run_probe(c, one);
}

void run_probe(const ProbeConfig& c, core::ProcessGroup& group) {
  core::throw_if_problems(c.problems());
  nlohmann::json config_json = {{"schemes", c.schemes},
                                {"scheme_settings", model::schemes_json(c.schemes, c.overrides)},
                                {"model", c.model},
                                {"train", c.inputs.train_prefix},
                                {"vocab", c.inputs.vocab_path},
                                {"vocab_size", c.inputs.vocab_size},
                                {"max_tokens", c.inputs.batching.max_tokens},
                                {"sentences", c.inputs.sentences},
                                {"length", c.inputs.length},
                                {"analysis_setting", c.analysis_setting},
                                {"analysis_stack", c.analysis_stack},
                                {"seeds", c.seeds},
                                {"batches", c.batches},
                                {"seed", c.seed},
                                {"dropout", c.dropout},
                                {"label_smoothing", c.label_smoothing},
                                {"precision", model::to_string(c.precision)},
                                {"power_iterations", c.power_iterations},
                                {"jacobian_tokens", c.jacobian_tokens},
                                {"sweep", c.sweep},
                                {"sweep_layers", c.sweep_layers},
                                {"sweep_d", c.sweep_d},
                                {"critical_lr", c.critical_lr}};
  if (c.critical_lr)
    config_json["critical_lr_settings"] = {{"range", {c.critical_lr_lo, c.critical_lr_hi}},
                                           {"tol", c.critical_lr_tol},
                                           {"lanczos_steps", c.lanczos_steps}};
  // Rank 0 trains the vocabulary (when one is trained) and caches the corpus; the others then read them.
  auto inputs = c.inputs;
  if (!group.is_main()) {
    group.barrier();
    if (!inputs.train_prefix.empty() && inputs.vocab_path.empty())
      inputs.vocab_path = (std::filesystem::path(c.out) / "vocab" / data::kVocabModelFile).string();
  }
  const BatchSource source(inputs, c.out);
  if (group.is_main()) group.barrier();
  if (c.sweep) write_sweep(c, config_json, source, group);
  else if (c.critical_lr) write_critical_lr(c, config_json, source, group);
  else write_probe(c, config_json, source, group);
}

}  // namespace normlab::analysis
