// model.json: what a trained model came from (docs/user-guide.md, "Get the trained model out"):
// the step, the final loss, the last evaluation, the dataset and its fingerprint, the recipe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "fulcrum/v1/coordinator.pb.h"
#include "trainer_image/trainer/loop/trainer_config.h"

namespace fulcrum::trainer {

struct TrainedModelFacts {
  std::string why;  // "steps done", "epochs done"
  int64_t step = 0;
  int64_t samples_seen = 0;
  // Samples weighted by their step's sample efficiency (Progress::equivalent_samples): what an
  // adaptive global batch's --epochs counted.
  double equivalent_samples = 0.0;
  double final_loss = 0.0;
  std::string checksum;  // of the trained parameters, as the trainer logs it
  std::size_t parameters = 0;
  std::size_t trained_parameters = 0;  // the others are frozen
  bool custom_loss = false;
  int64_t dataset_samples = 0;
  const fulcrum::v1::Evaluation* last_evaluation = nullptr;  // none yet
};

nlohmann::json ModelRecord(const TrainerConfig& config, const TrainedModelFacts& facts);

}  // namespace fulcrum::trainer
