#include "trainer_image/trainer/loop/model_record.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>

#include "trainer_image/trainer/state/training_state.h"
#include "trainer_image/trainer/trainer_flags.h"

namespace fulcrum::trainer {
namespace {

// The update rule and its schedule, named as the flags name them.
nlohmann::json RecipeJson(const TrainerConfig& config) {
  const OptimizerOptions& optimizer = config.optimizer;
  const ScheduleOptions& schedule = config.schedule;
  return {{"optimizer", NameOf(optimizer.kind)},
          {"learning_rate", optimizer.learning_rate},
          {"momentum", optimizer.momentum},
          {"nesterov", optimizer.nesterov},
          {"weight_decay", optimizer.weight_decay},
          {"clip_gradient_norm", config.clip_gradient_norm},
          {"precision", NameOf(config.precision.precision)},
          {"channels_last", config.precision.channels_last},
          {"schedule",
           {{"kind", NameOf(schedule.kind)},
            {"warmup_steps", schedule.warmup_steps},
            {"final_factor", schedule.final_factor},
            {"step_size", schedule.step_size},
            {"gamma", schedule.gamma}}},
          {"steps", config.steps},
          {"epochs", config.epochs},
          {"seed", config.seed}};
}

// Which data: the source, and for a packed dataset a fingerprint of its dataset.json (its
// fields, sizes and shards).
nlohmann::json DatasetJson(const DatasetOptions& options, int64_t samples) {
  nlohmann::json dataset = {{"samples", samples}};
  if (!options.packed_dir.empty()) {
    std::ifstream file(std::filesystem::path(options.packed_dir) / "dataset.json",
                       std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(file)), {});
    char fingerprint[17];
    std::snprintf(fingerprint, sizeof fingerprint, "%016lx",
                  static_cast<unsigned long>(Fnv1a(std::as_bytes(std::span(text)))));
    dataset["packed"] = options.packed_dir;
    dataset["fingerprint"] = std::string("fnv1a64:") + fingerprint;
  } else if (!options.record_file.empty()) {
    dataset["records"] = options.record_file;
  } else {
    dataset["synthetic_seed"] = options.seed;
  }
  return dataset;
}

}  // namespace

nlohmann::json ModelRecord(const TrainerConfig& config, const TrainedModelFacts& facts) {
  nlohmann::json evaluation = nullptr;
  if (const fulcrum::v1::Evaluation* last = facts.last_evaluation) {
    evaluation = {{"step", last->step()},
                  {"loss", last->loss()},
                  {"accuracy", last->has_accuracy() ? nlohmann::json(last->accuracy())
                                                    : nlohmann::json(nullptr)},
                  {"samples", last->samples()}};
  }
  return {{"format", "fulcrum.model"},
          {"version", 1},
          {"job", config.job},
          {"why", facts.why},
          {"step", facts.step},
          {"samples_seen", facts.samples_seen},
          {"equivalent_samples", facts.equivalent_samples},
          {"final_loss", facts.final_loss},
          {"last_evaluation", evaluation},
          {"checksum", facts.checksum},
          {"model",
           {{"kind", config.model.kind == ModelKind::kTorchScript ? "torchscript" : "builtin"},
            {"file", config.model.torchscript},
            {"parameters", facts.parameters},
            {"trained_parameters", facts.trained_parameters},
            {"custom_loss", facts.custom_loss}}},
          {"dataset", DatasetJson(config.data, facts.dataset_samples)},
          {"recipe", RecipeJson(config)}};
}

}  // namespace fulcrum::trainer
