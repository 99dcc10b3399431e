#include "trainer_image/trainer/trainer_flags.h"

#include <unistd.h>

#include <functional>
#include <map>
#include <sstream>

#include "common/flag_parsing.h"

namespace fulcrum::trainer {

const char* const kTrainerUsage =
    "usage: fulcrum-trainer (--coordinator HOST:PORT --token-file F\n"
    "                        (--coordinator-ca PEM | --coordinator-insecure true)\n"
    "                        | --world-size N --rank R --rendezvous HOST:PORT\n"
    "                          --batches B0,B1,...) [options]\n"
    "  membership: --job NAME --pod NAME --node NAME --gpu-product LABEL --host ADDR\n"
    "  model:      --model mlp|cnn|resnet18|torchscript --torchscript FILE --data-file FILE\n"
    "              --record-features D --dataset-size N --input-features D --hidden H\n"
    "              --image-size S --classes C --shuffle true|false --seed N\n"
    "  optimizer:  --optimizer sgd|adam --lr F --momentum F --steps N (0: until stopped)\n"
    "  state:      --checkpoint-dir DIR --checkpoint-every N\n"
    "  runtime:    --metrics-port P (-1 off) --collective-timeout-ms MS --bucket-elements N\n"
    "              --overlap true|false (all-reduce buckets during backward; default true)\n"
    "              --threads N --sample-log FILE\n"
    "  device:     --device auto|cpu|cuda (auto: cuda when a GPU is visible) --device-index N\n"
    "              --collective auto|gloo|nccl (auto: nccl on cuda, gloo on the CPU)\n"
    "  emulation:  --emulated-slowdown F --slowdown-file FILE (default $FULCRUM_SLOWDOWN_FILE)\n"
    "              --emulated-max-micro-batch N (larger micro-batches fail as out of memory;\n"
    "              tests and demos only)\n";

namespace {

using flags::ParseNumber;

Status ParseBatches(const std::string& flag, const std::string& text, std::vector<int>* out) {
  std::istringstream parts(text);
  std::string part;
  while (std::getline(parts, part, ',')) {
    int batch = 0;
    if (Status status = ParseNumber(flag, part, &batch); !status.ok()) return status;
    if (batch < 0) return InvalidArgument(flag, "batches must be >= 0");
    out->push_back(batch);
  }
  return Ok();
}

// A flag whose value names one of a fixed set of choices.
template <typename Enum>
flags::FlagSetter OneOf(Enum* out, std::vector<std::pair<std::string, Enum>> choices) {
  return [out, choices = std::move(choices)](const std::string& flag,
                                             const std::string& value) -> Status {
    std::string names;
    for (const auto& [name, choice] : choices) {
      if (value == name) {
        *out = choice;
        return Ok();
      }
      names += (names.empty() ? "" : ", ") + name;
    }
    return InvalidArgument(flag, "must be one of " + names);
  };
}

std::string Hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

Status Validate(const TrainerFlags& flags) {
  if (flags.coordinator.empty()) {
    if (flags.world_size < 1) return InvalidArgument("--world-size", "must be >= 1");
    if (flags.rank < 0 || flags.rank >= flags.world_size) {
      return InvalidArgument("--rank", "must be in [0, --world-size)");
    }
    if (flags.rendezvous.find(':') == std::string::npos) {
      return InvalidArgument("--rendezvous", "is required without --coordinator: HOST:PORT");
    }
    if (static_cast<int>(flags.batches.size()) != flags.world_size) {
      return InvalidArgument("--batches", "needs one local batch per rank (--world-size of them)");
    }
  } else if (flags.token_file.empty()) {
    return InvalidArgument("--token-file", "is required with --coordinator");
  } else if (flags.coordinator_ca.empty() == !flags.coordinator_insecure) {
    return InvalidArgument("--coordinator-ca",
                           flags.coordinator_insecure
                               ? "and --coordinator-insecure true exclude each other"
                               : "is required with --coordinator: the CA file to verify the "
                                 "coordinator's TLS certificate against (the operator mounts it "
                                 "beside the token), or --coordinator-insecure true for a local "
                                 "plaintext coordinator");
  }
  if (flags.model == ModelKind::kTorchScript &&
      (flags.torchscript.empty() || flags.data_file.empty() || flags.record_features < 1)) {
    return InvalidArgument("--model",
                           "torchscript needs --torchscript, --data-file and --record-features");
  }
  if (flags.dataset_size < 1) return InvalidArgument("--dataset-size", "must be >= 1");
  if (flags.input_features < 1 || flags.hidden < 1 || flags.classes < 2 || flags.image_size < 4) {
    return InvalidArgument("--input-features/--hidden/--classes/--image-size",
                           "must be >= 1, >= 1, >= 2 and >= 4");
  }
  if (!(flags.learning_rate > 0.0)) return InvalidArgument("--lr", "must be > 0");
  if (!(flags.momentum >= 0.0 && flags.momentum < 1.0))
    return InvalidArgument("--momentum", "must be in [0, 1)");
  if (flags.steps < 0) return InvalidArgument("--steps", "must be >= 0");
  if (flags.checkpoint_every < 0) return InvalidArgument("--checkpoint-every", "must be >= 0");
  if (flags.checkpoint_every > 0 && flags.checkpoint_dir.empty()) {
    return InvalidArgument("--checkpoint-dir", "is required with --checkpoint-every");
  }
  if (flags.metrics_port < -1 || flags.metrics_port > 65535) {
    return InvalidArgument("--metrics-port", "must be -1 (off) or a port in [0, 65535]");
  }
  if (!(flags.emulated_slowdown >= 1.0 && flags.emulated_slowdown <= 100.0)) {
    return InvalidArgument("--emulated-slowdown", "must be in [1, 100]");
  }
  if (flags.collective_timeout_ms < 100)
    return InvalidArgument("--collective-timeout-ms", "must be >= 100");
  if (flags.bucket_elements < 1024) return InvalidArgument("--bucket-elements", "must be >= 1024");
  if (flags.threads < 1) return InvalidArgument("--threads", "must be >= 1");
  if (flags.device_index < 0) return InvalidArgument("--device-index", "must be >= 0");
  if (flags.device == DeviceKind::kCpu && flags.collective == CollectiveKind::kNccl) {
    return InvalidArgument("--collective", "nccl needs --device cuda; use gloo on the CPU");
  }
  if (flags.emulated_max_micro_batch < 0)
    return InvalidArgument("--emulated-max-micro-batch", "must be >= 0 (0: off)");
  return Ok();
}

}  // namespace

Result<TrainerFlags> ParseTrainerFlags(const std::vector<std::string>& args,
                                       const std::map<std::string, std::string>& environment) {
  TrainerFlags f;
  if (const auto file = environment.find("FULCRUM_SLOWDOWN_FILE"); file != environment.end()) {
    f.slowdown_file = file->second;
  }
  using Setter = flags::FlagSetter;
  auto number = [](auto* out) -> Setter {
    return [out](const std::string& flag, const std::string& value) {
      return ParseNumber(flag, value, out);
    };
  };
  const std::map<std::string, Setter> setters = {
      {"--job", flags::TextFlag(&f.job)},
      {"--coordinator", flags::TextFlag(&f.coordinator)},
      {"--token-file", flags::TextFlag(&f.token_file)},
      {"--coordinator-ca", flags::TextFlag(&f.coordinator_ca)},
      {"--coordinator-insecure", flags::BoolFlag(&f.coordinator_insecure)},
      {"--pod", flags::TextFlag(&f.pod)},
      {"--node", flags::TextFlag(&f.node)},
      {"--gpu-product", flags::TextFlag(&f.gpu_product)},
      {"--rank", number(&f.rank)},
      {"--world-size", number(&f.world_size)},
      {"--rendezvous", flags::TextFlag(&f.rendezvous)},
      {"--batches", [&](auto& flag, auto& v) { return ParseBatches(flag, v, &f.batches); }},
      {"--host", flags::TextFlag(&f.host)},
      {"--model", OneOf(&f.model, {{"mlp", ModelKind::kMlp},
                                   {"cnn", ModelKind::kCnn},
                                   {"resnet18", ModelKind::kResNet18},
                                   {"torchscript", ModelKind::kTorchScript}})},
      {"--torchscript", flags::TextFlag(&f.torchscript)},
      {"--data-file", flags::TextFlag(&f.data_file)},
      {"--record-features", number(&f.record_features)},
      {"--dataset-size", number(&f.dataset_size)},
      {"--input-features", number(&f.input_features)},
      {"--hidden", number(&f.hidden)},
      {"--image-size", number(&f.image_size)},
      {"--classes", number(&f.classes)},
      {"--shuffle", flags::BoolFlag(&f.shuffle)},
      {"--seed", number(&f.seed)},
      {"--optimizer",
       OneOf(&f.optimizer, {{"sgd", OptimizerKind::kSgd}, {"adam", OptimizerKind::kAdam}})},
      {"--lr", number(&f.learning_rate)},
      {"--momentum", number(&f.momentum)},
      {"--steps", number(&f.steps)},
      {"--checkpoint-dir", flags::TextFlag(&f.checkpoint_dir)},
      {"--checkpoint-every", number(&f.checkpoint_every)},
      {"--metrics-port", number(&f.metrics_port)},
      {"--emulated-slowdown", number(&f.emulated_slowdown)},
      {"--slowdown-file", flags::TextFlag(&f.slowdown_file)},
      {"--collective-timeout-ms", number(&f.collective_timeout_ms)},
      {"--bucket-elements", number(&f.bucket_elements)},
      {"--sample-log", flags::TextFlag(&f.sample_log)},
      {"--threads", number(&f.threads)},
      {"--device", OneOf(&f.device, {{"auto", DeviceKind::kAuto},
                                     {"cpu", DeviceKind::kCpu},
                                     {"cuda", DeviceKind::kCuda}})},
      {"--device-index", number(&f.device_index)},
      {"--collective", OneOf(&f.collective, {{"auto", CollectiveKind::kAuto},
                                             {"gloo", CollectiveKind::kGloo},
                                             {"nccl", CollectiveKind::kNccl}})},
      {"--emulated-max-micro-batch", number(&f.emulated_max_micro_batch)},
      {"--overlap", flags::BoolFlag(&f.overlap)},
  };
  if (Status status = flags::ApplyFlags(args, setters); !status.ok()) return status.error();
  if (f.node.empty()) f.node = Hostname();
  if (f.pod.empty()) f.pod = Hostname() + "-" + std::to_string(getpid());
  if (Status status = Validate(f); !status.ok()) return status.error();
  return f;
}

}  // namespace fulcrum::trainer
