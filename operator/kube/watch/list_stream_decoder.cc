#include "operator/kube/watch/list_stream_decoder.h"

namespace fulcrum::kube {

ListStreamDecoder::ListStreamDecoder(std::function<void(std::string_view)> on_item,
                                     std::function<void(std::string_view)> on_metadata)
    : on_item_(std::move(on_item)), on_metadata_(std::move(on_metadata)) {}

void ListStreamDecoder::Finish(Capture what) {
  if (what == Capture::kItem) {
    on_item_(captured_);
  } else if (what == Capture::kMetadata) {
    on_metadata_(captured_);
  }
  captured_.clear();
  capture_ = Capture::kNone;
}

void ListStreamDecoder::Feed(std::string_view bytes) {
  // Copies the captured value in runs rather than byte by byte.
  std::size_t run_start = 0;
  auto flush_run = [&](std::size_t end) {
    if (capture_ != Capture::kNone && end > run_start)
      captured_.append(bytes.substr(run_start, end - run_start));
    run_start = end;
  };
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
        if (reading_key_) {
          reading_key_ = false;
          expect_key_ = false;
        }
      } else if (reading_key_) {
        key_ += c;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string_ = true;
        if (depth_ == 1 && expect_key_) {
          reading_key_ = true;
          key_.clear();
        }
        break;
      case '{':
      case '[':
        if (capture_ == Capture::kNone) {
          const bool item = depth_ == 2 && c == '{' && key_ == "items";
          const bool metadata = depth_ == 1 && c == '{' && key_ == "metadata";
          if (item || metadata) {
            capture_ = item ? Capture::kItem : Capture::kMetadata;
            capture_depth_ = depth_ + 1;
            run_start = i;
          }
        }
        ++depth_;
        if (depth_ == 1) expect_key_ = true;
        break;
      case '}':
      case ']':
        if (capture_ != Capture::kNone && depth_ == capture_depth_) {
          flush_run(i + 1);
          Finish(capture_);
        }
        --depth_;
        if (depth_ == 0) complete_ = true;
        break;
      case ',':
        if (depth_ == 1) expect_key_ = true;
        break;
      default:
        break;
    }
  }
  flush_run(bytes.size());
}

}  // namespace fulcrum::kube
