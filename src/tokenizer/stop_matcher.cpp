#include "tokenizer/stop_matcher.h"

namespace rl {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) continue;
    stops_.push_back(std::move(stops[i]));
    index_.push_back(i);
  }
}

StopMatcher::Output StopMatcher::push(std::string_view piece) {
  Output out;
  if (matched_) {
    out.stop_index = matched_;
    return out;
  }
  std::string buf = std::move(held_);
  held_.clear();
  buf.append(piece);
  size_t best_pos = std::string::npos;
  size_t best = 0;
  for (size_t i = 0; i < stops_.size(); ++i) {
    size_t pos = buf.find(stops_[i]);
    if (pos < best_pos) {
      best_pos = pos;
      best = i;
    }
  }
  if (best_pos != std::string::npos) {
    matched_ = index_[best];
    out.text = buf.substr(0, best_pos);
    out.stop_index = matched_;
    return out;
  }
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t k = std::min(s.size() - 1, buf.size()); k > hold; --k) {
      if (buf.compare(buf.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  held_ = buf.substr(buf.size() - hold);
  buf.resize(buf.size() - hold);
  out.text = std::move(buf);
  return out;
}

std::string StopMatcher::flush() {
  if (matched_) return {};
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace rl
