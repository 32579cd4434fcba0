// Minimal leveled logging to stderr, and a terminal progress bar that stays silent when stderr is not a TTY.
#pragma once

#include <cstdint>
#include <string>

namespace rl {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kQuiet = 4 };
void set_log_level(LogLevel level);
LogLevel log_level();
void log_msg(LogLevel level, const std::string& msg);
inline void log_info(const std::string& m) { log_msg(LogLevel::kInfo, m); }
inline void log_warn(const std::string& m) { log_msg(LogLevel::kWarn, m); }
inline void log_error(const std::string& m) { log_msg(LogLevel::kError, m); }
inline void log_debug(const std::string& m) { log_msg(LogLevel::kDebug, m); }

bool stderr_is_terminal();

// Draws "label [#####.....] 42% 1.2/3.0 GB" on stderr, only on a terminal.
class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total);
  ~ProgressBar();
  void update(uint64_t done);
  void finish();

 private:
  std::string label_;
  uint64_t total_;
  bool enabled_;
  int last_pct_ = -1;
  bool finished_ = false;
};

double now_seconds();  // monotonic clock

}  // namespace rl
