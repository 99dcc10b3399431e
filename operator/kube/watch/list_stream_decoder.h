// Splits a list response (`{"kind":..., "metadata":{...}, "items":[{...}, ...]}`)
// into its items while the body is still arriving, so that a list of 10,000
// pods (75 MB of JSON) is decoded one item at a time, in step with the
// download, instead of being held whole and parsed into one huge tree. Pure; no I/O.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace fulcrum::kube {

class ListStreamDecoder {
 public:
  // `on_item` gets the JSON text of each element of the top-level "items"
  // array; `on_metadata` the text of the top-level "metadata" object.
  ListStreamDecoder(std::function<void(std::string_view item)> on_item,
                    std::function<void(std::string_view metadata)> on_metadata);

  void Feed(std::string_view bytes);
  // True once the top-level object has been closed.
  bool complete() const { return complete_; }

 private:
  enum class Capture { kNone, kItem, kMetadata };
  void Finish(Capture what);

  std::function<void(std::string_view)> on_item_;
  std::function<void(std::string_view)> on_metadata_;
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
  bool expect_key_ = false;  // at depth 1, the next string is a key
  bool reading_key_ = false;
  std::string key_;  // the current top-level key
  Capture capture_ = Capture::kNone;
  int capture_depth_ = 0;  // depth_ inside the captured value
  std::string captured_;
  bool complete_ = false;
};

}  // namespace fulcrum::kube
