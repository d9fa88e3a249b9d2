// A new instrument plugs into training through the callback list alone (train/callback.h): a
// test-only callback sees the documented events in order, and what it sees agrees with an
// independent computation: the label-smoothed loss recomputed from the logits with plain torch
// operations, and the gradient norm recomputed from the gradients the optimiser is given.
#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "../data/test_data.h"
#include "core/process_group.h"
#include "core/tokens.h"
#include "train/callback.h"
#include "train/trainer.h"

namespace normlab::train {
namespace {

constexpr double kEps = 0.1;

// What the recorder saw; the test owns it (the callbacks end with the run).
struct Seen {
  std::vector<std::string> events;
  std::vector<double> own_loss, reported_loss, own_norm, reported_norm;
  int64_t context_update = -1;
  int saves = 0;
};

// Everything it sees, as one line per event; the loss of each update recomputed from the logits.
class Recorder final : public TrainCallback {
 public:
  explicit Recorder(Seen& seen) : seen_(seen) {}
  void train_begins(const RunContext& run) override {
    seen_.events.push_back("begins");
    seen_.context_update = run.update;
    net_ = run.net;
  }
  void update_begins(int64_t update) override {
    seen_.events.push_back("update_begins " + std::to_string(update));
    loss_ = 0;
  }
  void batch_ready(const data::Batch&) override { seen_.events.push_back("batch"); }
  // (1-eps) nll + eps/V sum_v(-log p_v) over the non-padding targets (REFERENCE §2, uniform).
  void output_ready(const torch::Tensor& logits, const torch::Tensor& target) override {
    seen_.events.push_back("output");
    const auto lp = torch::log_softmax(logits.detach().to(torch::kDouble), -1);
    const auto t = target.to(lp.device());
    const auto real = t.ne(kPad);
    const auto nll = -lp.gather(-1, t.unsqueeze(-1)).squeeze(-1);
    const auto smooth = -lp.mean(-1);
    loss_ += (((1 - kEps) * nll + kEps * smooth) * real).sum().item<double>();
  }
  void gradients_ready(int64_t update) override {
    seen_.events.push_back("gradients " + std::to_string(update));
    double sq = 0;
    for (const auto& p : net_->parameters())
      if (p.grad().defined()) sq += p.grad().to(torch::kDouble).pow(2).sum().item<double>();
    seen_.own_norm.push_back(std::sqrt(sq));
  }
  void update_done(const UpdateReport& r) override {
    seen_.events.push_back("done " + std::to_string(r.update));
    seen_.own_loss.push_back(loss_);
    seen_.reported_loss.push_back(r.loss);
    seen_.reported_norm.push_back(r.grad_norm);
  }
  void training_ends() override { seen_.events.push_back("ends"); }
  void validation_done(nlohmann::json& record) override {
    seen_.events.push_back("validation");
    record["recorder"] = 1;  // a field of its own in the record
  }
  void save_state(model::TensorMap&) const override { ++seen_.saves; }

 private:
  Seen& seen_;
  model::Model net_{nullptr};
  double loss_ = 0;
};

TrainConfig tiny_run(const std::string& prefix, const std::string& out) {
  TrainConfig c;
  c.train_prefix = c.valid_prefix = prefix;
  c.out = out;
  c.max_pairs = 64;
  c.vocab.vocab_size = 300;
  c.batching.max_tokens = 400;
  c.model.d_model = 16;
  c.model.ffn_dim = 32;
  c.model.heads = 2;
  c.model.encoder_layers = c.model.decoder_layers = 1;
  c.max_steps = 3;
  c.log_interval = 1;
  c.loss.label_smoothing = kEps;
  return c;
}

TEST(TrainCallback, AnInstrumentPlugsInThroughTheListAlone) {
  NORMLAB_REQUIRE_SHARED_DATA(de, "multi30k/val.de.gz");
  testing::ScratchDir dir("callback");
  const auto prefix = de.substr(0, de.size() - std::string(".de.gz").size());
  auto c = tiny_run(prefix, dir / "run");
  Seen seen_by;
  const Seen* seen = &seen_by;
  TrainCallbacks callbacks;
  callbacks.push_back(std::make_unique<Recorder>(seen_by));
  core::ProcessGroup one;
  const auto result = train(c, std::move(callbacks), torch::kCPU, one);
  ASSERT_EQ(result.updates, 3);

  // The events of one update, in the documented order (every batch of the update is owned).
  ASSERT_GE(seen->events.size(), 5u);
  EXPECT_EQ(seen->events[0], "begins");
  EXPECT_EQ(seen->context_update, 0);
  EXPECT_EQ(seen->events[1], "update_begins 1");
  EXPECT_EQ(seen->events[2], "batch");
  EXPECT_EQ(seen->events[3], "output");
  EXPECT_EQ(seen->events[4], "gradients 1");
  EXPECT_EQ(seen->events[5], "done 1");
  const std::vector<std::string> tail(seen->events.end() - 3, seen->events.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"done 3", "ends", "validation"}));
  EXPECT_EQ(seen->saves, 1);  // the one checkpoint, checkpoint_last.pt at the --max-steps stop

  // What it was told agrees with what it computed itself.
  ASSERT_EQ(seen->own_loss.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(seen->reported_loss[i], seen->own_loss[i], 1e-4 * seen->own_loss[i]) << "update " << i + 1;
    EXPECT_NEAR(seen->reported_norm[i], seen->own_norm[i], 1e-5 * seen->own_norm[i]) << "update " << i + 1;
  }
  // Its field reached the validation record in metrics.jsonl.
  std::ifstream metrics(dir / "run/metrics.jsonl");
  bool found = false;
  for (std::string line; std::getline(metrics, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("valid_loss")) found = j.value("recorder", 0) == 1;
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace normlab::train
