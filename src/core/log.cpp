#include "core/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace rl {

namespace {
// RIDGELINE_LOG=debug|info|warn|error|quiet sets the starting level (default: warn).
int initial_level() {
  const char* env = std::getenv("RIDGELINE_LOG");
  if (env == nullptr) return static_cast<int>(LogLevel::kWarn);
  const std::string v = env;
  if (v == "debug") return static_cast<int>(LogLevel::kDebug);
  if (v == "info") return static_cast<int>(LogLevel::kInfo);
  if (v == "error") return static_cast<int>(LogLevel::kError);
  if (v == "quiet") return static_cast<int>(LogLevel::kQuiet);
  if (v != "warn" && v != "warning") {
    // Not through log_msg: this runs inside the first log call's initialization of the level.
    std::fprintf(stderr, "ridgeline: warning: RIDGELINE_LOG=%s is not one of debug, info, warn, error, quiet; "
                 "using warn\n", env);
  }
  return static_cast<int>(LogLevel::kWarn);
}
// A function-local static: read on first use, so a log call from another file's static initializer still sees it.
std::atomic<int>& level_ref() {
  static std::atomic<int> level{initial_level()};
  return level;
}
}  // namespace

void set_log_level(LogLevel level) { level_ref() = static_cast<int>(level); }
LogLevel log_level() { return static_cast<LogLevel>(level_ref().load()); }

void log_msg(LogLevel level, const std::string& msg) {
  if (static_cast<int>(level) < level_ref().load()) return;
  static const char* kNames[] = {"debug", "info", "warning", "error"};
  std::fprintf(stderr, "ridgeline: %s: %s\n", kNames[static_cast<int>(level)], msg.c_str());
}

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

ProgressBar::ProgressBar(std::string label, uint64_t total)
    : label_(std::move(label)), total_(total), enabled_(stderr_is_terminal() && total > 0) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(uint64_t done) {
  if (!enabled_ || finished_) return;
  int pct = static_cast<int>(done * 100 / total_);
  if (pct == last_pct_) return;
  last_pct_ = pct;
  constexpr int kWidth = 30;
  int filled = pct * kWidth / 100;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  std::fprintf(stderr, "\r%s [%s] %3d%% %.2f/%.2f GB", label_.c_str(), bar.c_str(), pct, done / 1e9,
               total_ / 1e9);
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (!enabled_ || finished_) return;
  update(total_);
  std::fprintf(stderr, "\n");
  finished_ = true;
}

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace rl
