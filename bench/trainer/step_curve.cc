// fulcrum-step-curve: measures c(b), one trainer's forward+backward time as a function of its
// local batch b, on the device the trainer would use (CUDA events on a GPU, host clock on the
// CPU), with the trainer's own models. The balancer models c(b) as a + k·b; this prints how far
// the measured curve is from that line (JSON on stdout), so the model's fit can be judged on
// real hardware. Data is generated once per b and moved to the device before timing: c(b) is
// the device's work, not the synthetic data generator's.
//
//   fulcrum-step-curve --model cnn|resnet18|mlp [trainer flags] [--batches 1,2,4,...]
//                      [--repeats N] [--warmup N]
#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "operator/balancer/weighted_line_fit.h"
#include "trainer_image/trainer/data/dataset.h"
#include "trainer_image/trainer/device/compute_device.h"
#include "trainer_image/trainer/model/model.h"
#include "trainer_image/trainer/trainer_flags.h"

namespace {

using fulcrum::trainer::ComputeDevice;

struct CurveOptions {
  std::vector<int> batches = {1,  2,  3,   4,   6,   8,   12,  16,  24,  32, 48,
                              64, 96, 128, 160, 192, 256, 320, 384, 448, 512};
  int repeats = 10;
  int warmup = 3;
};

// Splits off the flags this tool owns; the rest are fulcrum-trainer's.
fulcrum::Result<CurveOptions> TakeCurveFlags(std::vector<std::string>& args) {
  CurveOptions options;
  std::vector<std::string> rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag != "--batches" && flag != "--repeats" && flag != "--warmup") {
      rest.push_back(flag);
      continue;
    }
    if (i + 1 == args.size()) return fulcrum::InvalidArgument(flag, "needs a value");
    const std::string value = args[++i];
    try {
      if (flag == "--batches") {
        options.batches.clear();
        std::istringstream parts(value);
        for (std::string part; std::getline(parts, part, ',');) {
          const int batch = std::stoi(part);
          if (batch < 1) return fulcrum::InvalidArgument(flag, "batches must be >= 1");
          options.batches.push_back(batch);
        }
        std::sort(options.batches.begin(), options.batches.end());
      } else if (flag == "--repeats") {
        options.repeats = std::stoi(value);
      } else {
        options.warmup = std::stoi(value);
      }
    } catch (const std::exception&) {
      return fulcrum::InvalidArgument(flag, "expected a number, got \"" + value + "\"");
    }
  }
  if (options.batches.empty()) return fulcrum::InvalidArgument("--batches", "is empty");
  if (options.repeats < 1 || options.warmup < 0)
    return fulcrum::InvalidArgument("--repeats/--warmup", "must be >= 1 and >= 0");
  args = rest;
  return options;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// c(b) = a + k·b by least squares weighted 1/c², i.e. minimising relative residuals: the
// balancer compares step times as ratios, so a 1 ms miss at b=1 matters as much as 50 ms at 512.
nlohmann::json FitLine(const std::vector<std::pair<int, double>>& points) {
  fulcrum::balancer::WeightedLineFit fit;  // the balancer's own fitter
  for (auto [b, c] : points) fit.Add(b, c, 1.0 / (c * c));
  const std::optional<fulcrum::balancer::Line> line = fit.Solve();
  if (!line) return nullptr;
  const double a = line->intercept;
  const double k = line->slope;
  double worst = 0.0, total = 0.0;
  int worst_batch = 0;
  for (auto [b, c] : points) {
    const double relative = (a + k * b - c) / c;
    total += std::abs(relative);
    if (std::abs(relative) > std::abs(worst)) worst = relative, worst_batch = b;
  }
  return {{"intercept_seconds", a},
          {"seconds_per_sample", k},
          {"max_relative_residual", worst},
          {"max_residual_at_batch", worst_batch},
          {"mean_abs_relative_residual", total / static_cast<double>(points.size())}};
}

int Run(std::vector<std::string> args) {
  fulcrum::Result<CurveOptions> curve = TakeCurveFlags(args);
  if (!curve.ok()) {
    std::cerr << "fulcrum-step-curve: " << curve.error().ToString() << "\n";
    return 2;
  }
  const auto model_flag = std::find(args.begin(), args.end(), "--model");
  const std::string model_name = model_flag != args.end() && std::next(model_flag) != args.end()
                                     ? *std::next(model_flag)
                                     : "mlp";
  args.insert(args.end(), {"--world-size", "1", "--rendezvous", "127.0.0.1:1", "--batches", "1"});
  fulcrum::Result<fulcrum::trainer::TrainerConfig> flags =
      fulcrum::trainer::ParseTrainerFlags(args);
  if (!flags.ok()) {
    std::cerr << "fulcrum-step-curve: " << flags.error().ToString() << "\n";
    return 2;
  }
  flags->data.synthetic_size = std::max<int64_t>(flags->data.synthetic_size, curve->batches.back());
  torch::set_num_threads(flags->threads);
  auto device = fulcrum::trainer::OpenComputeDevice(flags->device, flags->device_index);
  auto model = fulcrum::trainer::MakeModel(flags->model);
  auto dataset = fulcrum::trainer::MakeDataset(flags->data);
  for (const fulcrum::Error* error :
       {device.ok() ? nullptr : &device.error(), model.ok() ? nullptr : &model.error(),
        dataset.ok() ? nullptr : &dataset.error()}) {
    if (error != nullptr) {
      std::cerr << "fulcrum-step-curve: " << error->ToString() << "\n";
      return 2;
    }
  }
  ComputeDevice& compute = **device;
  (*model)->To(compute.device());
  std::vector<int64_t> all(static_cast<std::size_t>(curve->batches.back()));
  std::iota(all.begin(), all.end(), 0);
  const fulcrum::trainer::Batch data = (*dataset)->Get(all);
  // Synthetic data: field 0 is the input, field 1 the label.
  const torch::Tensor inputs = data.fields.at(0).to(compute.device());
  const torch::Tensor targets = data.fields.at(1).to(compute.device());
  if (fulcrum::Status bound = (*model)->Bind((*dataset)->fields(), {.input = 0, .label = 1});
      !bound.ok()) {
    std::cerr << "fulcrum-step-curve: " << bound.error().ToString() << "\n";
    return 2;
  }
  std::vector<torch::Tensor> parameters;
  for (const auto& parameter : (*model)->NamedParameters()) parameters.push_back(parameter.tensor);

  nlohmann::json points = nlohmann::json::array();
  std::vector<std::pair<int, double>> medians;
  for (int batch : curve->batches) {
    const torch::Tensor x = inputs.narrow(0, 0, batch);
    const torch::Tensor y = targets.narrow(0, 0, batch);
    std::vector<double> seconds;
    try {
      compute.ResetPeakMemory();
      for (int i = 0; i < curve->warmup + curve->repeats; ++i) {
        for (torch::Tensor& parameter : parameters) parameter.mutable_grad() = torch::Tensor();
        compute.StartCompute();
        torch::nn::functional::cross_entropy(
            (*model)->Forward({x}).toTensor(), y,
            torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
            .backward();
        const double elapsed = compute.FinishComputeSeconds();
        if (i >= curve->warmup) seconds.push_back(elapsed);
      }
    } catch (const c10::OutOfMemoryError&) {
      points.push_back({{"batch", batch}, {"out_of_memory", true}});
      compute.ReleaseCachedMemory();
      break;
    }
    const double median = Median(seconds);
    medians.emplace_back(batch, median);
    points.push_back({{"batch", batch},
                      {"compute_seconds", median},
                      {"min_seconds", *std::min_element(seconds.begin(), seconds.end())},
                      {"max_seconds", *std::max_element(seconds.begin(), seconds.end())},
                      {"samples_per_second", batch / median},
                      {"peak_memory_bytes", compute.PeakMemoryBytes()}});
  }
  // Throughput b/c(b) grows with b while a fixed per-step cost dominates; the smallest batch
  // reaching 90% of the best measured throughput is where adding samples stops being free.
  double best = 0.0;
  for (auto [b, c] : medians) best = std::max(best, b / c);
  int efficient = 0;
  for (auto [b, c] : medians) {
    if (b / c >= 0.9 * best) {
      efficient = b;
      break;
    }
  }
  std::vector<std::pair<int, double>> upper;
  for (auto point : medians)
    if (point.first >= efficient) upper.push_back(point);
  const nlohmann::json report = {
      {"benchmark", "step_curve"},
      {"device", compute.device().str()},
      {"device_product", compute.product().empty() ? "cpu" : compute.product()},
      {"emulated", false},
      {"model", model_name},
      {"image_size", flags->model.image_size},
      {"parameters",
       std::accumulate(parameters.begin(), parameters.end(), int64_t{0},
                       [](int64_t sum, const torch::Tensor& p) { return sum + p.numel(); })},
      {"repeats", curve->repeats},
      {"points", points},
      {"linear_fit_all", FitLine(medians)},
      {"batch_at_90pct_throughput", efficient},
      {"linear_fit_from_that_batch", FitLine(upper)},
  };
  std::cout << report.dump(2) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return Run(std::vector<std::string>(argv + 1, argv + argc));
}
