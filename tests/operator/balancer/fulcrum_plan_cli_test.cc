// fulcrum-plan reads a JSON cluster, prints the plan as JSON, and rejects bad input with a
// message naming the field and exit code 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "operator/cmd/fulcrum_plan/plan_input.h"

namespace fulcrum::plan_cli {
namespace {

using ::testing::HasSubstr;

struct RunResult {
  int exit_code;
  std::string output;  // stdout and stderr
};

RunResult RunPlanCli(const std::string& input_json) {
  const std::string path = ::testing::TempDir() + "/fulcrum_plan_input.json";
  std::ofstream(path) << input_json;
  const std::string command = std::string(FULCRUM_PLAN_BINARY) + " " + path + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  RunResult result{-1, ""};
  if (pipe == nullptr) return result;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) result.output += buffer;
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

constexpr const char* kThreeGpus = R"({
  "global_batch": 1024, "policy": "optimal", "tail_seconds": 0.02,
  "workers": [{"id": "a100", "a": 0.034, "k": 0.000272},
              {"id": "v100", "a": 0.034, "k": 0.000701},
              {"id": "t4", "a": 0.018, "k": 0.00228, "min": 1, "max": 258}]})";

TEST(FulcrumPlanCli, PrintsThePlanAsJson) {
  const RunResult run = RunPlanCli(kThreeGpus);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json plan = nlohmann::json::parse(run.output);
  EXPECT_EQ(plan["policy"], "optimal");
  const int total = plan["batches"]["a100"].get<int>() + plan["batches"]["v100"].get<int>() +
                    plan["batches"]["t4"].get<int>();
  EXPECT_EQ(total, 1024);
  EXPECT_GT(plan["batches"]["a100"].get<int>(), plan["batches"]["t4"].get<int>());
  EXPECT_DOUBLE_EQ(plan["efficiency"].get<double>(), 1.0);
  EXPECT_GT(plan["ideal_samples_per_second"].get<double>(), 0.0);
  EXPECT_GT(plan["step_seconds"].get<double>(), 0.0);
}

TEST(FulcrumPlanCli, ExitsWithTwoAndNamesTheFieldOnBadInput) {
  const RunResult run = RunPlanCli(
      R"({"global_batch": 8, "workers": [{"id": "x", "a": 0, "k": 1},
          {"id": "y", "a": 0, "k": 1}, {"id": "z", "a": 0, "k": -1}]})");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("workers[2].k: must be a finite number > 0"));
}

TEST(FulcrumPlanCli, ExitsWithTwoOnMalformedJsonOrMissingFile) {
  EXPECT_EQ(RunPlanCli("{not json").exit_code, 2);
  const std::string command = std::string(FULCRUM_PLAN_BINARY) + " /nonexistent.json 2>/dev/null";
  EXPECT_EQ(WEXITSTATUS(std::system(command.c_str())), 2);
}

struct BadDocument {
  const char* name;
  const char* json;
  const char* field;
};

class ParsePlanInputRejects : public ::testing::TestWithParam<BadDocument> {};

TEST_P(ParsePlanInputRejects, NamingTheJsonField) {
  Result<PlanInput> input = ParsePlanInput(GetParam().json);
  ASSERT_FALSE(input.ok());
  EXPECT_EQ(input.error().field, GetParam().field) << input.error().ToString();
}

INSTANTIATE_TEST_SUITE_P(
    BadDocuments, ParsePlanInputRejects,
    ::testing::Values(
        BadDocument{"NoWorkers", R"({"global_batch": 8, "workers": []})", "workers"},
        BadDocument{"MissingBatch", R"({"workers": [{"id": "x", "a": 0, "k": 1}]})",
                    "global_batch"},
        BadDocument{"FractionalBatch",
                    R"({"global_batch": 8.5, "workers": [{"id": "x", "a": 0, "k": 1}]})",
                    "global_batch"},
        BadDocument{"StringK", R"({"global_batch": 8, "workers": [{"id": "x", "a": 0, "k": "1"}]})",
                    "workers[0].k"},
        BadDocument{"MissingA", R"({"global_batch": 8, "workers": [{"id": "x", "k": 1}]})",
                    "workers[0].a"},
        BadDocument{"NegativeA",
                    R"({"global_batch": 8, "workers": [{"id": "x", "a": -1, "k": 1}]})",
                    "workers[0].a"},
        BadDocument{
            "MaxBelowMin",
            R"({"global_batch": 8, "workers": [{"id": "x", "a": 0, "k": 1, "min": 4, "max": 2}]})",
            "workers[0].max"},
        BadDocument{"UnknownWorkerField",
                    R"({"global_batch": 8, "workers": [{"id": "x", "a": 0, "k": 1, "speed": 2}]})",
                    "workers[0].speed"},
        BadDocument{
            "UnknownPolicy",
            R"({"global_batch": 8, "policy": "fast", "workers": [{"id": "x", "a": 0, "k": 1}]})",
            "policy"},
        BadDocument{"InfeasibleWithoutAccumulation",
                    R"({"global_batch": 8, "allow_accumulation": false,
                        "workers": [{"id": "x", "a": 0, "k": 1, "max": 4}]})",
                    "workers[].max"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ParsePlanInput, FillsDefaultsForMinMaxPolicyAndTail) {
  Result<PlanInput> input =
      ParsePlanInput(R"({"global_batch": 64, "workers": [{"id": "x", "a": 0.1, "k": 0.01}]})");
  ASSERT_TRUE(input.ok()) << input.error().ToString();
  EXPECT_EQ(input->policy, balancer::PolicyKind::kOptimal);
  EXPECT_EQ(input->request.workers[0].min_batch, 1);
  EXPECT_EQ(input->request.workers[0].max_batch, 64);
  EXPECT_EQ(input->request.tail_seconds, 0.0);
  EXPECT_TRUE(input->request.allow_accumulation);
}

}  // namespace
}  // namespace fulcrum::plan_cli
