// The model-contract test modules and dataset (tests/trainer_image/model/make_contract_models.py),
// written once per test binary with Debian's python3-torch.
#pragma once

#include <string>

namespace fulcrum::testing {

// The directory holding data/ and the *.pt modules; empty if Python failed (the output is
// printed).
const std::string& ContractModels();

}  // namespace fulcrum::testing
