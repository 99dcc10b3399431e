// Decode throughput of a saved protobuf list response (no network): how fast the informer
// turns a list into cache objects. Prints JSON.
//   kube_protobuf_decode_bench FILE [ROUNDS]
// FILE: e.g. curl -H 'Accept: application/vnd.kubernetes.protobuf' .../api/v1/pods -o FILE
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "operator/kube/protobuf/list_decoder.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: kube_protobuf_decode_bench FILE [ROUNDS]\n";
    return 2;
  }
  std::ifstream input(argv[1], std::ios::binary);
  if (!input) {
    std::cerr << "cannot read " << argv[1] << "\n";
    return 2;
  }
  std::stringstream buffer;
  buffer << input.rdbuf();
  const std::string body = buffer.str();
  const int rounds = argc > 2 ? std::stoi(argv[2]) : 3;
  const auto& schema = fulcrum::kube::protobuf::K8sSchema::BuiltIn();
  double best = 1e9;
  std::size_t objects = 0;
  std::size_t cached_bytes = 0;
  for (int round = 0; round < rounds; ++round) {
    objects = cached_bytes = 0;
    const auto start = std::chrono::steady_clock::now();
    auto list =
        fulcrum::kube::protobuf::DecodeList(schema, body, [&](fulcrum::kube::CachedObject o) {
          ++objects;
          cached_bytes += o.encoded_size();
        });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!list.ok()) {
      std::cerr << list.error().ToString() << "\n";
      return 1;
    }
    best = std::min(best, seconds);
  }
  std::cout << nlohmann::json{{"objects", objects},
                              {"body_bytes", body.size()},
                              {"cached_bytes", cached_bytes},
                              {"best_seconds", best},
                              {"objects_per_second", static_cast<double>(objects) / best}}
                   .dump()
            << "\n";
  return 0;
}
