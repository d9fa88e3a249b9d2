#include "train/position.h"

#include <nlohmann/json.hpp>

namespace normlab::train {

nlohmann::json position_json(const Position& p, double wall_s, int world_size) {
  return {{"update", p.update},
          {"epoch", p.epoch},
          {"next_batch", p.next_batch},
          {"best_valid_loss", p.best_valid_loss},
          {"best_valid_bleu", p.best_valid_bleu},
          {"wall_s", wall_s},
          {"world_size", world_size}};
}

Position position_from_json(const nlohmann::json& j) {
  Position p;
  p.update = j.at("update");
  p.epoch = j.at("epoch");
  p.next_batch = j.at("next_batch");
  p.wall_s = j.at("wall_s");
  if (!j.at("best_valid_loss").is_null()) p.best_valid_loss = j.at("best_valid_loss");
  p.best_valid_bleu = j.value("best_valid_bleu", -1.0);
  return p;
}

}  // namespace normlab::train
