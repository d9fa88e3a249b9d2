#include "train/records.h"

#include <cmath>
#include <iomanip>
#include <sstream>

namespace normlab::train {

namespace {

double accuracy_of(const Sums& s) { return static_cast<double>(s.correct) / static_cast<double>(s.tokens); }

}  // namespace

nlohmann::json validation_record(const Position& pos, const Sums& v, double wall_s, bool end_of_epoch,
                                 bool accuracy) {
  const double valid_nll = v.nll / v.tokens;
  nlohmann::json record = {{"step", pos.update},          {"epoch", pos.epoch},
                           {"valid_loss", v.loss / v.tokens}, {"valid_nll", valid_nll},
                           {"valid_ppl", std::exp(valid_nll)}, {"valid_tokens", v.tokens},
                           {"wall_s", wall_s}};
  if (accuracy) record["valid_accuracy"] = accuracy_of(v);
  if (!end_of_epoch) record["mid_epoch"] = true;
  return record;
}

std::string validation_line(const Position& pos, const Sums& v, bool end_of_epoch, const nlohmann::json& record,
                            bool best) {
  const double valid_nll = v.nll / v.tokens;
  std::ostringstream line;
  line << std::fixed << std::setprecision(3) << "epoch " << pos.epoch << (end_of_epoch ? "" : " (mid-epoch)")
       << " | valid loss " << v.loss / v.tokens << " | nll " << valid_nll << " | ppl " << std::exp(valid_nll);
  if (record.contains("valid_accuracy")) line << " | accuracy " << record.at("valid_accuracy").get<double>();
  if (record.contains("valid_bleu")) line << " | bleu " << std::setprecision(2) << record.at("valid_bleu").get<double>();
  line << (best ? " | best" : "");
  return line.str();
}

nlohmann::json init_valid_record(const Sums& v) {
  return {{"step", 0}, {"epoch", 1}, {"init_valid_loss", v.loss / v.tokens}, {"init_valid_nll", v.nll / v.tokens}};
}

std::string init_valid_line(const Sums& v) {
  std::ostringstream line;
  line << std::fixed << std::setprecision(3) << "initial model | valid loss " << v.loss / v.tokens << " | nll "
       << v.nll / v.tokens;
  return line.str();
}

nlohmann::json test_record(const Position& pos, const Sums& t, bool accuracy) {
  nlohmann::json record = {{"step", pos.update},
                           {"epoch", pos.completed_epoch()},
                           {"test_loss", t.loss / t.tokens},
                           {"test_nll", t.nll / t.tokens},
                           {"test_ppl", std::exp(t.nll / t.tokens)},
                           {"test_tokens", t.tokens}};
  if (accuracy) record["test_accuracy"] = accuracy_of(t);
  return record;
}

std::string test_line(const std::string& prefix, const Sums& t, bool accuracy) {
  std::ostringstream line;
  line << std::fixed << std::setprecision(3) << "test (" << prefix << ", final model) | loss " << t.loss / t.tokens
       << " | nll " << t.nll / t.tokens << " | ppl " << std::exp(t.nll / t.tokens);
  if (accuracy) line << " | accuracy " << accuracy_of(t);
  return line.str();
}

std::string complete_line(const std::string& out, const Position& pos, bool out_of_time) {
  return "normlab train: " + out + " is complete (update " + std::to_string(pos.update) + ", epoch " +
         std::to_string(pos.completed_epoch()) +
         (out_of_time ? ", " + std::to_string(static_cast<int64_t>(pos.wall_s)) + " s of training" : std::string()) +
         "): nothing to do; raise --max-steps, --max-epochs" + (out_of_time ? " or --stop-time-hours" : "") +
         " to continue it";
}

}  // namespace normlab::train
