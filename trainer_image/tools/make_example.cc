// fulcrum-make-example: writes a small TorchScript classifier and a matching record file, so
// the user-model path (--model torchscript) can be tried and tested without Python.
//   fulcrum-make-example MODULE.pt RECORDS.bin [FEATURES=16] [CLASSES=4] [COUNT=512]
// Records: FEATURES little-endian float32 then one int32 label, back to back.
#include <torch/script.h>
#include <torch/torch.h>

#include <cstdint>
#include <fstream>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc < 3 || argc > 6) {
    std::cerr << "usage: fulcrum-make-example MODULE.pt RECORDS.bin [FEATURES] [CLASSES] [COUNT]\n";
    return 2;
  }
  const int64_t features = argc > 3 ? std::stoi(argv[3]) : 16;
  const int64_t classes = argc > 4 ? std::stoi(argv[4]) : 4;
  const int64_t count = argc > 5 ? std::stoi(argv[5]) : 512;
  if (features < 1 || classes < 2 || count < 1) {
    std::cerr << "fulcrum-make-example: FEATURES >= 1, CLASSES >= 2 and COUNT >= 1\n";
    return 2;
  }
  torch::manual_seed(7);
  torch::jit::Module module("ExampleClassifier");
  // Trained parameters need requires_grad (one without it stays frozen).
  module.register_parameter("w1", (torch::randn({features, 32}) * 0.2).requires_grad_(), false);
  module.register_parameter("b1", torch::zeros({32}).requires_grad_(), false);
  module.register_parameter("w2", (torch::randn({32, classes}) * 0.2).requires_grad_(), false);
  module.register_parameter("b2", torch::zeros({classes}).requires_grad_(), false);
  module.define(R"(
    def forward(self, x):
        hidden = torch.relu(torch.matmul(x, self.w1) + self.b1)
        return torch.matmul(hidden, self.w2) + self.b2
  )");
  module.save(argv[1]);

  const torch::Tensor teacher = torch::randn({features, classes});
  const torch::Tensor inputs = torch::randn({count, features});
  const torch::Tensor labels = inputs.matmul(teacher).argmax(1).to(torch::kInt32);
  std::ofstream records(argv[2], std::ios::binary);
  for (int64_t row = 0; row < count; ++row) {
    records.write(static_cast<const char*>(inputs[row].contiguous().data_ptr()),
                  static_cast<std::streamsize>(features * sizeof(float)));
    const int32_t label = labels[row].item<int32_t>();
    records.write(reinterpret_cast<const char*>(&label), sizeof label);
  }
  std::cout << "wrote " << argv[1] << " and " << count << " records to " << argv[2] << "\n";
  return records ? 0 : 1;
}
