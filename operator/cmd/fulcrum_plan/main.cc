// fulcrum-plan: prints the balancer's plan for a JSON description of a cluster.
//   fulcrum-plan cluster.json     (or "-" for standard input)
// Exit codes: 0 plan printed, 2 invalid input or usage (the message names the field).
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "operator/balancer/planner.h"
#include "operator/cmd/fulcrum_plan/plan_input.h"
#include "operator/cmd/fulcrum_plan/plan_output.h"

namespace {

constexpr int kInvalidInput = 2;
constexpr const char* kUsage =
    "usage: fulcrum-plan FILE\n"
    "  FILE: JSON {\"global_batch\": B, \"policy\": \"optimal|proportional|equal\",\n"
    "              \"workers\": [{\"id\", \"a\", \"k\", \"min\", \"max\", \"current\"}],\n"
    "              \"tail_seconds\", \"allow_accumulation\"}; \"-\" reads standard input\n";

int Fail(const std::string& message) {
  std::cerr << "fulcrum-plan: error: " << message << "\n";
  return kInvalidInput;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::cout << kUsage;
    return 0;
  }
  if (argc != 2) {
    std::cerr << kUsage;
    return kInvalidInput;
  }
  const std::string path = argv[1];
  std::ostringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream file(path);
    if (!file) return Fail("cannot read " + path);
    text << file.rdbuf();
  }
  fulcrum::Result<fulcrum::plan_cli::PlanInput> input =
      fulcrum::plan_cli::ParsePlanInput(text.str());
  if (!input.ok()) {
    const fulcrum::Error& error = input.error();
    return Fail(error.field.empty() ? error.message : error.field + ": " + error.message);
  }
  fulcrum::Result<fulcrum::balancer::Plan> plan =
      fulcrum::balancer::MakePlan(input->request, *fulcrum::balancer::MakePolicy(input->policy));
  if (!plan.ok()) return Fail(plan.error().ToString());
  std::cout << fulcrum::plan_cli::PlanToJson(*plan).dump(2) << "\n";
  return 0;
}
