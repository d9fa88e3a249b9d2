// normlab probe against independent computations: Xiong et al.'s Lemma 2 (and a mean-field
// recursion of the analysis setting), central finite differences, a second way to average
// gradients, and byte-identical files for identical seeds.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "analysis/probe.h"
#include "core/tokens.h"
#include "model/seq2seq.h"
#include "train/loss.h"
#include "../model/tiny_model.h"
#include "one_thread.h"

namespace normlab::analysis {
namespace {

std::string temp_dir(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() / ("normlab_probe_test_" + name);
  std::filesystem::remove_all(p);
  return p.string();
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// CSV rows as column-name -> field maps.
std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  auto split = [](const std::string& l) {
    std::vector<std::string> out;
    std::stringstream s(l);
    for (std::string f; std::getline(s, f, ',');) out.push_back(f);
    if (!l.empty() && l.back() == ',') out.push_back("");
    return out;
  };
  const auto header = split(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    const auto fields = split(line);
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size(); ++i) row[header[i]] = i < fields.size() ? fields[i] : "";
    rows.push_back(row);
  }
  return rows;
}

// Pre-LN in the analysis setting, by a mean-field recursion over q = E||x_i||^2 and
// c = E[x_i . x_j] (i != j, same sentence of n tokens), in units of C: attention adds the
// common vector mean_j LN(x_j) W^V W^O, of squared norm 1/n + (1-1/n) rho; the FFN adds 1/2 to
// q and kappa(rho) to c, kappa the ReLU (arc-cosine) kernel. Returns q after layers 1..L,
// and in `correlation` (if given) the stream's c/q after layer L.
std::vector<double> pre_ln_mean_field(int64_t layers, int64_t n, double* correlation = nullptr) {
  const double pi = std::acos(-1.0);
  auto kappa = [&](double r) { return (std::sqrt(1 - r * r) + (pi - std::acos(r)) * r) / (2 * pi); };
  double q = 1.0, c = 0.0;
  std::vector<double> out;
  for (int64_t l = 0; l < layers; ++l) {
    const double a = 1.0 / n + (1.0 - 1.0 / n) * c / q;
    q += a, c += a;
    const double r = c / q;
    q += 0.5, c += kappa(r);
    out.push_back(q);
  }
  if (correlation) *correlation = c / q;
  return out;
}

// The same recursion with causal self-attention (a decoder-only stack): position t (0-based)
// averages positions 0..t, so q_t and c_tu = E[x_t . x_u] depend on the positions. Attention adds
// (1/((t+1)(u+1))) sum_{s<=t, r<=u} rho_sr to c_tu (rho_tt = 1), the FFN 1/2 to q_t and
// kappa(rho_tu) to c_tu. Returns the mean over positions of q after layers 1..L.
// `cross`: what an encoder-decoder's cross-attention adds between the two, to every q_t and
// c_tu alike (with W^Q = W^K = 0 every position gets the same vector; the test below).
std::vector<double> causal_pre_ln_mean_field(int64_t layers, int64_t n, double cross = 0.0) {
  const double pi = std::acos(-1.0);
  auto kappa = [&](double r) { return (std::sqrt(1 - r * r) + (pi - std::acos(r)) * r) / (2 * pi); };
  const auto size = static_cast<size_t>(n);
  std::vector<std::vector<double>> c(size, std::vector<double>(size, 0.0));
  for (size_t t = 0; t < size; ++t) c[t][t] = 1.0;
  auto correlations = [&] {
    auto rho = c;
    for (size_t t = 0; t < size; ++t)
      for (size_t u = 0; u < size; ++u) rho[t][u] = c[t][u] / std::sqrt(c[t][t] * c[u][u]);
    return rho;
  };
  std::vector<double> out;
  for (int64_t l = 0; l < layers; ++l) {
    const auto rho = correlations();
    std::vector<std::vector<double>> prefix(size + 1, std::vector<double>(size + 1, 0.0));  // sums over s<t, r<u
    for (size_t t = 0; t < size; ++t)
      for (size_t u = 0; u < size; ++u)
        prefix[t + 1][u + 1] = rho[t][u] + prefix[t][u + 1] + prefix[t + 1][u] - prefix[t][u];
    for (size_t t = 0; t < size; ++t)
      for (size_t u = 0; u < size; ++u)
        c[t][u] += prefix[t + 1][u + 1] / static_cast<double>((t + 1) * (u + 1)) + cross;
    const auto after = correlations();
    for (size_t t = 0; t < size; ++t)
      for (size_t u = 0; u < size; ++u) c[t][u] += t == u ? 0.5 : kappa(after[t][u]);
    double mean = 0.0;
    for (size_t t = 0; t < size; ++t) mean += c[t][t] / static_cast<double>(n);
    out.push_back(mean);
  }
  return out;
}

ProbeConfig analysis_config(const std::string& out) {
  ProbeConfig c;
  c.model = test::tiny_config("post-ln");
  c.model.d_model = 512;
  c.model.encoder_layers = 6;
  c.analysis_setting = true;
  c.inputs.vocab_size = 1000;
  c.inputs.sentences = 4;
  c.inputs.length = 32;
  c.seeds = 2;
  c.batches = 2;
  c.jacobian_tokens = 16;
  c.out = out;
  return c;
}

TEST(Probe, Lemma2AtD512InTheAnalysisSetting) {
  const test::OneThread one_thread;
  auto c = analysis_config(temp_dir("lemma2"));
  run_probe(c);
  const auto field = pre_ln_mean_field(6, c.inputs.length);
  int post = 0, pre = 0;
  for (const auto& r : read_csv(c.out + "/hidden_norms.csv")) {
    const double v = std::stod(r.at("value_mean"));
    const int64_t layer = std::stoll(r.at("layer"));
    if (r.at("quantity") == "x_post5") {
      ++post;
      EXPECT_NEAR(v, 1.5, 0.15) << "Post-LN layer " << layer;  // Lemma 2: E||x^{post,5}||^2 = 1.5 d
    }
    if (r.at("quantity") == "x_pre") {
      ++pre;
      const double l = static_cast<double>(layer + 1);
      EXPECT_GE(v, 0.9 * (1 + l / 2)) << "Pre-LN layer " << layer;  // Lemma 2's bounds
      EXPECT_LE(v, 1.1 * (1 + 1.5 * l)) << "Pre-LN layer " << layer;
      EXPECT_NEAR(v, field[static_cast<size_t>(layer)], 0.1 * field[static_cast<size_t>(layer)]) << "layer " << layer;
      EXPECT_EQ(std::stod(r.at("lemma_lower")), 1 + l / 2);
    }
  }
  EXPECT_EQ(post, 6);
  EXPECT_EQ(pre, 6);
  // The Jacobian's spectral norm is sqrt(d)/||y|| for gamma = 1 (Xiong eq. 26).
  for (const auto& r : read_csv(c.out + "/ln_jacobian.csv"))
    EXPECT_NEAR(std::stod(r.at("jacobian_norm")), std::stod(r.at("sqrt_d_over_norm")),
                1e-3 * std::stod(r.at("sqrt_d_over_norm"))) << r.at("scheme") << " " << r.at("ln");
}

// A decoder-only stack in the analysis setting (causal attention, W^Q = W^K = 0): Post-LN's
// x^{post,5} is still 3/2 (the norm's output plus an FFN of it), Pre-LN's stream follows the
// causal recursion above, which grows faster than the encoder's (early positions average few).
TEST(Probe, CausalMeanFieldOfADecoderOnlyStack) {
  const test::OneThread one_thread;
  auto c = analysis_config(temp_dir("causal"));
  c.model.kind = model::kDecoderOnly;
  c.model.encoder_layers = 0;
  c.model.decoder_layers = 6;
  c.schemes = {"post-ln", "pre-ln"};
  c.inputs.fit_model(c.model);
  run_probe(c);
  const auto field = causal_pre_ln_mean_field(6, c.inputs.length);
  const auto encoder_field = pre_ln_mean_field(6, c.inputs.length);
  EXPECT_GT(field.back(), 1.1 * encoder_field.back());  // the two recursions differ measurably
  int post = 0, pre = 0;
  for (const auto& r : read_csv(c.out + "/hidden_norms.csv")) {
    EXPECT_EQ(r.at("stack"), "decoder");
    const double v = std::stod(r.at("value_mean"));
    const auto layer = static_cast<size_t>(std::stoll(r.at("layer")));
    if (r.at("quantity") == "x_post5") {
      ++post;
      EXPECT_NEAR(v, 1.5, 0.15) << "Post-LN layer " << layer;
    }
    if (r.at("quantity") == "x_pre") {
      ++pre;
      EXPECT_NEAR(v, field[layer], 0.1 * field[layer]) << "layer " << layer;
      // Lemma 2's bounds: Xiong's proof needs only a convex combination of normalised rows,
      // which causal attention is (docs/probe.md); measured 1.63 .. 6.38 inside them.
      const double l = static_cast<double>(layer + 1);
      EXPECT_GE(v, 0.97 * (1 + l / 2)) << "layer " << layer;
      EXPECT_LE(v, 1 + 1.5 * l) << "layer " << layer;
      EXPECT_DOUBLE_EQ(std::stod(r.at("lemma_lower")), 1 + l / 2) << "layer " << layer;
      EXPECT_DOUBLE_EQ(std::stod(r.at("lemma_upper")), 1 + 1.5 * l) << "layer " << layer;
    }
  }
  EXPECT_EQ(post, 6);
  EXPECT_EQ(pre, 6);
}

// An encoder-decoder's decoder in the analysis setting (--analysis-stack decoder): the encoder on
// x_0, then the decoder on y_0, causal, its cross-attention reading the encoder's output. With
// W^Q = W^K = 0 the cross-attention adds to every position the same vector mean_j m_j W^V W^O of
// the encoder's S normalised output rows m_j, of squared norm (1/S + (1 - 1/S) rho_enc) C in the
// mean field, rho_enc the correlation of the encoder's stream after its layers (the recursion
// above). Lemma 2's argument with that third sublayer ([0, C] per layer): Pre-LN 1 + l/2 .. 1 +
// 5l/2; Peri-LN's output norms add exactly C per sublayer: 1 + 3l.
TEST(Probe, CrossAttentionMeanFieldOfAnEncoderDecoderDecoder) {
  const test::OneThread one_thread;
  auto c = analysis_config(temp_dir("cross"));
  c.model.decoder_layers = 6;
  c.analysis_stack = "decoder";
  c.schemes = {"post-ln", "pre-ln", "peri-ln"};
  run_probe(c);
  const int64_t n = c.inputs.length;
  double rho = 0.0;
  const auto encoder_field = pre_ln_mean_field(6, n, &rho);
  const double cross = 1.0 / static_cast<double>(n) + (1.0 - 1.0 / static_cast<double>(n)) * rho;
  const auto field = causal_pre_ln_mean_field(6, n, cross);
  EXPECT_GT(field.back(), 1.2 * causal_pre_ln_mean_field(6, n).back());  // the cross term is measurable
  std::map<std::string, int> seen;
  for (const auto& r : read_csv(c.out + "/hidden_norms.csv")) {
    const auto& q = r.at("quantity");
    if (q != "x_pre" && q != "x_post5") continue;
    const auto& scheme = r.at("scheme");
    const auto& stack = r.at("stack");
    ++seen[scheme + "/" + stack + "/" + q];
    const double v = std::stod(r.at("value_mean"));
    const auto layer = static_cast<size_t>(std::stoll(r.at("layer")));
    const double l = static_cast<double>(layer + 1);
    const std::string where = scheme + " " + stack + " layer " + r.at("layer");
    if (q == "x_post5") EXPECT_NEAR(v, 1.5, 0.15) << where;
    if (scheme == "pre-ln" && stack == "encoder")
      EXPECT_NEAR(v, encoder_field[layer], 0.1 * encoder_field[layer]) << where;
    if (scheme == "pre-ln" && stack == "decoder") {
      EXPECT_NEAR(v, field[layer], 0.1 * field[layer]) << where;
      EXPECT_GE(v, 0.97 * (1 + l / 2)) << where;
      EXPECT_LE(v, 1 + 2.5 * l) << where;
      EXPECT_DOUBLE_EQ(std::stod(r.at("lemma_lower")), 1 + l / 2) << where;
      EXPECT_DOUBLE_EQ(std::stod(r.at("lemma_upper")), 1 + 2.5 * l) << where;
    }
    if (scheme == "peri-ln" && stack == "decoder") {
      EXPECT_NEAR(v, 1 + 3 * l, 0.1 * (1 + 3 * l)) << where;
      EXPECT_DOUBLE_EQ(std::stod(r.at("lemma_value")), 1 + 3 * l) << where;
    }
  }
  for (const std::string scheme : {"post-ln", "pre-ln", "peri-ln"})
    for (const std::string stack : {"encoder", "decoder"})
      EXPECT_EQ(seen[scheme + "/" + stack + "/" + (scheme == "post-ln" ? "x_post5" : "x_pre")], 6)
          << scheme << " " << stack;
}

// --analysis-stack names a stack the model has, and only in the analysis setting.
TEST(Probe, RefusesAnAnalysisStackTheModelLacks) {
  auto c = analysis_config(temp_dir("stack_refused"));
  c.analysis_stack = "decoder";
  EXPECT_TRUE(c.problems().empty());
  c.analysis_stack = "middle";
  EXPECT_EQ(c.problems().size(), 1u);
  c.model.kind = model::kEncoderOnly;
  c.analysis_stack = "decoder";
  ASSERT_EQ(c.problems().size(), 1u);
  EXPECT_NE(c.problems()[0].find("no decoder"), std::string::npos);
  c.model.kind = model::kDecoderOnly;
  c.analysis_stack = "encoder";
  ASSERT_EQ(c.problems().size(), 1u);
  EXPECT_NE(c.problems()[0].find("no encoder"), std::string::npos);
  c.model.kind = model::kEncoderDecoder;
  c.analysis_setting = false;
  ASSERT_FALSE(c.problems().empty());
  EXPECT_NE(c.problems()[0].find("needs --analysis-setting"), std::string::npos);
}

// The analogues of Lemma 2 (docs/probe.md) in the analysis setting, each derived here from
// the scheme's structure: Peri-LN adds exactly d per block, E||x_l||^2/d = 1 + 2l; LayerNorm
// scaling multiplies Pre-LN's per-layer increment [1/2, 3/2] by 1/k in layer k; Mix-LN's
// floor(alpha L) Post-LN layers give 3/2, and its Pre-LN layers start from a normalised stream.
TEST(Probe, AnaloguesOfLemma2ForTheSchemesSince2019) {
  const test::OneThread one_thread;
  auto c = analysis_config(temp_dir("lemma2_2025"));
  c.model.d_model = 256;
  c.model.encoder_layers = 4;  // Mix-LN: floor(0.25 * 4) = 1 Post-LN layer
  c.schemes = {"peri-ln", "lns", "mix-ln"};
  run_probe(c);
  std::map<std::string, int> seen;
  for (const auto& r : read_csv(c.out + "/hidden_norms.csv")) {
    const auto& q = r.at("quantity");
    if (q != "x_pre" && q != "x_post5") continue;
    const auto& scheme = r.at("scheme");
    ++seen[scheme + "/" + q];
    const double v = std::stod(r.at("value_mean"));
    const int64_t layer = std::stoll(r.at("layer"));
    const double l = static_cast<double>(layer + 1);
    const std::string where = scheme + " layer " + std::to_string(layer);
    if (scheme == "peri-ln") {
      EXPECT_NEAR(v, 1 + 2 * l, 0.05 * (1 + 2 * l)) << where;
      EXPECT_DOUBLE_EQ(std::stod(r.at("lemma_value")), 1 + 2 * l) << where;
    } else if (scheme == "lns") {
      double harmonic = 0;
      for (int64_t k = 1; k <= layer + 1; ++k) harmonic += 1.0 / static_cast<double>(k);
      EXPECT_GE(v, 0.97 * (1 + harmonic / 2)) << where;
      EXPECT_LE(v, 1 + 1.5 * harmonic) << where;
      EXPECT_NEAR(std::stod(r.at("lemma_upper")), 1 + 1.5 * harmonic, 1e-7) << where;
    } else if (q == "x_post5") {  // mix-ln's first layer
      EXPECT_EQ(layer, 0);
      EXPECT_NEAR(v, 1.5, 0.15) << where;
    } else {  // mix-ln's Pre-LN layers 1..3, after one Post-LN layer
      EXPECT_GE(v, 0.97 * (1 + (l - 1) / 2)) << where;
      EXPECT_LE(v, 1 + 1.5 * (l - 1)) << where;
    }
  }
  EXPECT_EQ(seen["peri-ln/x_pre"], 4);
  EXPECT_EQ(seen["lns/x_pre"], 4);
  EXPECT_EQ(seen["mix-ln/x_post5"], 1);
  EXPECT_EQ(seen["mix-ln/x_pre"], 3);
}

// A tiny model on random tokens, dropout off: the gradient norms the probe writes against
// central differences of the loss in float64.
ProbeConfig tiny_probe(const std::string& out, int64_t batches, const std::string& kind = model::kEncoderDecoder) {
  ProbeConfig c;
  c.model = test::tiny_config("post-ln");
  c.model.kind = kind;
  if (kind == model::kDecoderOnly) c.model.encoder_layers = 0;
  if (kind == model::kEncoderOnly) c.model.decoder_layers = 0;
  c.schemes = {"post-ln", "pre-ln"};
  c.inputs.vocab_size = 30;
  c.inputs.sentences = 3;
  c.inputs.length = kind == model::kEncoderOnly ? 12 : 5;  // an encoder's masks need tokens
  c.inputs.fit_model(c.model);
  c.seeds = 1;
  c.batches = batches;
  c.dropout = false;
  c.out = out;
  return c;
}

model::Model tiny_model(const ProbeConfig& c, const std::string& scheme, const data::Batch& first) {
  auto m = c.model;
  m.scheme = model::scheme_by_name(scheme);
  m.src_vocab_size = m.tgt_vocab_size = model::model_vocab_size(m.kind, c.inputs.vocab_size);
  auto net = model::create_model(m);
  model::initialize(net, c.seed, &first);
  net->eval();
  return net;
}

double mean_token_loss(model::Model& net, const data::Batch& b, double eps) {
  auto s = train::label_smoothed_nll(net->forward(b), b.target, eps, train::LabelSmoothingFormula::kUniform, kPad);
  return (s.loss / static_cast<double>(s.tokens)).item<double>();
}

// The probe's gradient norms of `checked` (scheme -> parameters) against central differences of
// the batch's mean token loss, in float64.
void expect_central_differences(const std::string& out, int64_t batches, const std::string& kind,
                                const std::map<std::string, std::vector<std::string>>& checked) {
  auto c = tiny_probe(out, batches, kind);
  run_probe(c);
  const BatchSource source(c.inputs, c.out);
  const auto batch = source.batches(c.seed, 1).front();
  ASSERT_GT(batch.target_tokens, 0);
  std::map<std::string, double> probed;
  for (const auto& r : read_csv(c.out + "/grad_norms.csv"))
    probed[r.at("scheme") + " " + r.at("param")] = std::stod(r.at("expected_grad_norm_mean"));
  for (const auto& [scheme, names] : checked) {
    auto net = tiny_model(c, scheme, batch);
    net->to(torch::kFloat64);
    torch::NoGradGuard no_grad;
    for (const auto& name : names) {
      auto w = net->named_parameters()[name];
      auto flat = w.view({-1});
      double sq = 0.0;
      const double h = 1e-6;
      for (int64_t i = 0; i < flat.numel(); ++i) {
        const double keep = flat[i].item<double>();
        flat[i] = keep + h;
        const double up = mean_token_loss(net, batch, c.label_smoothing);
        flat[i] = keep - h;
        const double down = mean_token_loss(net, batch, c.label_smoothing);
        flat[i] = keep;
        sq += std::pow((up - down) / (2 * h), 2);
      }
      const double fd = std::sqrt(sq);
      ASSERT_TRUE(probed.count(scheme + " " + name)) << name;
      EXPECT_NEAR(probed[scheme + " " + name], fd, 1e-4 * fd + 1e-9) << kind << " " << scheme << " " << name;
    }
  }
}

TEST(Probe, GradientNormsMatchCentralDifferences) {
  const test::OneThread one_thread;
  // One matrix per scheme and stack keeps it to ~1000 forward passes.
  expect_central_differences(
      temp_dir("fd"), 1, model::kEncoderDecoder,
      {{"post-ln", {"encoder.layers.0.self_attn.v_proj.weight", "decoder.layers.1.encoder_attn.q_proj.weight"}},
       {"pre-ln", {"encoder.layers.1.self_attn.out_proj.weight", "decoder.layers.0.fc1.bias"}}});
}

// The single-stack kinds on their own inputs: a causal LM's random blocks, an encoder's masked
// ones (the loss at its masked positions only), and the head RoBERTa puts on the encoder.
TEST(Probe, GradientNormsOfSingleStackModelsMatchCentralDifferences) {
  const test::OneThread one_thread;
  expect_central_differences(temp_dir("fd_decoder_only"), 1, model::kDecoderOnly,
                             {{"post-ln", {"decoder.layers.1.self_attn.v_proj.weight"}},
                              {"pre-ln", {"decoder.layers.0.fc2.weight", "decoder.layer_norm.weight"}}});
  expect_central_differences(temp_dir("fd_encoder_only"), 1, model::kEncoderOnly,
                             {{"post-ln", {"encoder.layers.0.self_attn.q_proj.weight", "lm_head.dense.weight"}},
                              {"pre-ln", {"encoder.layers.1.fc1.weight"}}});
}

TEST(Probe, ExpectedGradientIsTheGradientOfTheAveragedLoss) {
  const test::OneThread one_thread;
  auto c = tiny_probe(temp_dir("avg"), 3);
  run_probe(c);
  const BatchSource source(c.inputs, c.out);
  const auto batches = source.batches(c.seed, 3);
  auto net = tiny_model(c, "post-ln", batches.front());
  // One backward of (1/B) sum_b loss_b: its gradient is E_batches[dL/dW].
  torch::Tensor total = torch::zeros({});
  for (const auto& b : batches) {
    auto s = train::label_smoothed_nll(net->forward(b), b.target, c.label_smoothing,
                                       train::LabelSmoothingFormula::kUniform, kPad);
    total = total + s.loss / static_cast<double>(s.tokens);
  }
  (total / 3.0).backward();
  int checked = 0;
  for (const auto& r : read_csv(c.out + "/grad_norms.csv")) {
    if (r.at("scheme") != "post-ln") continue;
    auto g = net->named_parameters()[r.at("param")].grad();
    const double expected = g.norm().item<double>();
    // Absolute 1e-7: the key biases' true gradient is 0 (softmax ignores a shift), float32 leaves ~1e-9.
    EXPECT_NEAR(std::stod(r.at("expected_grad_norm_mean")), expected, 1e-5 * expected + 1e-7) << r.at("param");
    // ||E g|| <= E ||g|| (triangle inequality).
    EXPECT_LE(std::stod(r.at("expected_grad_norm_mean")), std::stod(r.at("mean_grad_norm_mean")) * (1 + 1e-6));
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(net->named_parameters().size()));
}

TEST(Probe, IdenticalSeedsGiveIdenticalFiles) {
  const test::OneThread one_thread;
  auto a = tiny_probe(temp_dir("same_a"), 2);
  auto b = tiny_probe(temp_dir("same_b"), 2);
  a.dropout = b.dropout = true;  // dropout's draws must repeat too
  a.seeds = b.seeds = 2;
  run_probe(a);
  run_probe(b);
  for (const char* f : {"/grad_norms.csv", "/hidden_norms.csv", "/ln_jacobian.csv"}) {
    EXPECT_FALSE(read(a.out + f).empty()) << f;
    EXPECT_EQ(read(a.out + f), read(b.out + f)) << f;
  }
  auto other = tiny_probe(temp_dir("same_c"), 2);
  other.seeds = 2;
  other.dropout = true;
  other.seed = 5;
  run_probe(other);
  EXPECT_NE(read(a.out + "/grad_norms.csv"), read(other.out + "/grad_norms.csv"));
}

TEST(Probe, SweepSlopesOfAPowerLaw) {
  const test::OneThread one_thread;
  EXPECT_NEAR(log_log_slope({1, 2, 4, 8}, {3, 3 / std::sqrt(2.0), 1.5, 3 / std::sqrt(8.0)}), -0.5, 1e-12);
  EXPECT_NEAR(log_log_slope({64, 128, 512}, {7, 7, 7}), 0.0, 1e-12);
}

}  // namespace
}  // namespace normlab::analysis
