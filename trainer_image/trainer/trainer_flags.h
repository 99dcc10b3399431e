// fulcrum-trainer's command line (CLI11), parsed into a TrainerConfig and validated; errors name
// the flag and the fix.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/result.h"
#include "trainer_image/trainer/loop/trainer_config.h"

namespace fulcrum::trainer {

// `args` without the program name. --help comes back as an error whose field is "--help" and
// whose message is the generated help (every flag, its default and its choices). `environment`
// supplies defaults that flags override: FULCRUM_SLOWDOWN_FILE sets --slowdown-file
// (fulcrum-local-node gives every container its node's file).
Result<TrainerConfig> ParseTrainerFlags(const std::vector<std::string>& args,
                                        const std::map<std::string, std::string>& environment = {});

// The names the flags give the choices (--optimizer adamw), for what reports a configuration.
std::string NameOf(OptimizerKind kind);
std::string NameOf(ScheduleKind kind);
std::string NameOf(Precision precision);

}  // namespace fulcrum::trainer
