// Where a trainer's samples come from. Torch-free (the command line fills it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fulcrum::trainer {

// Where samples come from: a packed dataset when packed_dir is set, a file of records when
// record_file is, else synthetic.
struct DatasetOptions {
  // A packed dataset (docs/dataset-format.md): the model's input is field input_field (default:
  // the one field besides the label), its target the integer scalar field label_field.
  std::string packed_dir;
  std::string input_field;
  std::string label_field = "label";
  // Records: record_features float32 values then one int32 label, little-endian, back to back.
  // The model's output width bounds the labels (torch refuses labels past it).
  std::string record_file;
  int record_features = 0;
  // Synthetic: x_i ~ N(0, 1) from SplitMix64(seed, i); label = argmax(W x_i) for a fixed
  // teacher W drawn from the seed, so the task is learnable. synthetic_shape is one sample's
  // shape ([input_features] for the MLP, [3, S, S] for the CNNs).
  int64_t synthetic_size = 4096;
  std::vector<int64_t> synthetic_shape;
  int classes = 10;
  uint64_t seed = 1;
  // EMULATION (tests and benchmarks only): every read sleeps this long per sample.
  int64_t emulated_read_microseconds_per_sample = 0;
};

}  // namespace fulcrum::trainer
