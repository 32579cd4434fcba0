// Stop strings over streamed text: feed the detokenizer's pieces, get back the text that is safe to
// emit.
//
// A stop string is found even when it spans pieces. Only a suffix that is a proper prefix of some
// stop string is held back. When a stop string occurs, the text before it is returned, the stop
// string itself is not, and the matcher ignores everything after. The match is decided by the first
// piece after which any stop string is complete; if several are complete then, the one that starts
// first wins (ties: the one listed first), so a short stop completing first beats a longer one that
// would have started at the same place. Emitted text never contains the start of a later match,
// since any such start would lie in the held suffix.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rl {

class StopMatcher {
 public:
  struct Output {
    std::string text;                  // safe to emit now
    std::optional<size_t> stop_index;  // index of the stop string that matched, once one has
  };

  // Empty stop strings are ignored.
  explicit StopMatcher(std::vector<std::string> stops);

  Output push(std::string_view piece);
  // End of stream without a match: returns the held text.
  std::string flush();
  bool matched() const { return matched_.has_value(); }
  std::optional<size_t> matched_stop() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::vector<size_t> index_;  // position of stops_[i] in the caller's list
  std::string held_;           // invariant: a proper prefix of some stop string (or empty)
  std::optional<size_t> matched_;
};

}  // namespace rl
