#include "backend/cuda/kernel_trace.h"

#if __has_include(<cupti_activity.h>)  // CUPTI's headers ship with the CUDA toolkit; without them, no trace
#define RL_HAVE_CUPTI 1
#include <cupti_activity.h>
#else
#define RL_HAVE_CUPTI 0
#endif
#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "core/log.h"

namespace rl::cuda {
#if RL_HAVE_CUPTI
namespace {

constexpr size_t kBufferBytes = size_t(8) << 20;  // one CUPTI activity buffer

// The CUPTI entry points the trace uses, resolved from the library at start.
struct Cupti {
  CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*flush_all)(uint32_t) = nullptr;
  CUptiResult (*next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*timestamp)(uint64_t*) = nullptr;
  CUptiResult (*result_string)(CUptiResult, const char**) = nullptr;
};

struct State {
  std::mutex mu;
  bool started = false;
  Cupti api;
  double offset_seconds = 0;  // now_seconds() − CUPTI's clock
  std::vector<Backend::KernelSpan> records;
  std::unordered_map<const char*, std::string> names;  // CUPTI shares one name string per kernel
  int64_t dropped = 0;
};

State& state() {
  static State s;
  return s;
}

// "void ns::(anonymous namespace)::kernel<128, 4>(Args)" → "ns::kernel<128, 4>".
std::string short_name(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && d != nullptr ? d : mangled;
  std::free(d);
  if (!s.empty() && s.back() == ')') {  // drop the argument list: from the '(' matching the last ')'
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')') ++depth;
      if (s[i] == '(' && --depth == 0) {
        s.resize(i);
        break;
      }
    }
  }
  if (s.rfind("void ", 0) == 0) s.erase(0, 5);
  const std::string anon = "(anonymous namespace)::";
  for (size_t i = s.find(anon); i != std::string::npos; i = s.find(anon, i)) s.erase(i, anon.size());
  return s;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  State& st = state();
  {
    std::lock_guard<std::mutex> lock(st.mu);
    CUpti_Activity* rec = nullptr;
    while (st.api.next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
      const bool kernel = rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL;
      if (!kernel && rec->kind != CUPTI_ACTIVITY_KIND_MEMCPY) continue;
      if (static_cast<int64_t>(st.records.size()) >= kKernelTraceMaxRecords) {
        ++st.dropped;
        continue;
      }
      if (!kernel) {  // a copy-engine copy, on the same track: "memcpy HtoD" etc.
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        const char* dir = m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD   ? "memcpy HtoD"
                          : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? "memcpy DtoH"
                          : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD ? "memcpy DtoD"
                                                                           : "memcpy";
        st.records.push_back(Backend::KernelSpan{dir, st.offset_seconds + static_cast<double>(m->start) * 1e-9,
                                                 static_cast<double>(m->end - m->start) * 1e-9});
        continue;
      }
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      auto it = st.names.find(k->name);
      if (it == st.names.end()) it = st.names.emplace(k->name, short_name(k->name)).first;
      st.records.push_back(Backend::KernelSpan{it->second, st.offset_seconds + static_cast<double>(k->start) * 1e-9,
                                               static_cast<double>(k->end - k->start) * 1e-9});
    }
  }
  std::free(buffer);
}

Status cupti_error(const State& st, const char* what, CUptiResult r) {
  const char* msg = nullptr;
  if (st.api.result_string != nullptr) st.api.result_string(r, &msg);
  return Status::error(std::string("kernel trace: ") + what + " failed: " + (msg != nullptr ? msg : "CUPTI error " +
                                                                                                   std::to_string(r)));
}

}  // namespace

Status kernel_trace_start() {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.started) return Status::ok();
  void* lib = nullptr;
  for (const char* path : {"libcupti.so.13", "/usr/local/cuda/lib64/libcupti.so.13",
                           "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13", "libcupti.so"}) {
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
  }
  if (lib == nullptr) {
    return Status::error("kernel trace: CUPTI (libcupti.so.13) not found on the library path or under /usr/local/cuda");
  }
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    return fn != nullptr;
  };
  Cupti& a = st.api;
  if (!sym(a.register_callbacks, "cuptiActivityRegisterCallbacks") || !sym(a.enable, "cuptiActivityEnable") ||
      !sym(a.flush_all, "cuptiActivityFlushAll") || !sym(a.next_record, "cuptiActivityGetNextRecord") ||
      !sym(a.timestamp, "cuptiGetTimestamp") || !sym(a.result_string, "cuptiGetResultString")) {
    return Status::error("kernel trace: the CUPTI library lacks an entry point of the activity API");
  }
  if (CUptiResult r = a.register_callbacks(buffer_requested, buffer_completed); r != CUPTI_SUCCESS) {
    return cupti_error(st, "cuptiActivityRegisterCallbacks", r);
  }
  uint64_t t = 0;
  if (CUptiResult r = a.timestamp(&t); r != CUPTI_SUCCESS) return cupti_error(st, "cuptiGetTimestamp", r);
  st.offset_seconds = now_seconds() - static_cast<double>(t) * 1e-9;
  if (CUptiResult r = a.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); r != CUPTI_SUCCESS) {
    return cupti_error(st, "cuptiActivityEnable(CONCURRENT_KERNEL)", r);
  }
  if (CUptiResult r = a.enable(CUPTI_ACTIVITY_KIND_MEMCPY); r != CUPTI_SUCCESS) {
    return cupti_error(st, "cuptiActivityEnable(MEMCPY)", r);
  }
  st.started = true;
  return Status::ok();
}

std::vector<Backend::KernelSpan> kernel_trace_take() {
  State& st = state();
  {
    std::lock_guard<std::mutex> lock(st.mu);
    if (!st.started) return {};
  }
  // Outside the lock: the flush delivers the buffers through buffer_completed, which takes it.
  st.api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::vector<Backend::KernelSpan> out;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    out.swap(st.records);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Backend::KernelSpan& x, const Backend::KernelSpan& y) { return x.start < y.start; });
  return out;
}

int64_t kernel_trace_dropped() {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.dropped;
}
#else
Status kernel_trace_start() {
  return Status::error("kernel trace: this build had no CUPTI headers (cupti_activity.h in the CUDA toolkit)");
}
std::vector<Backend::KernelSpan> kernel_trace_take() { return {}; }
int64_t kernel_trace_dropped() { return 0; }
#endif  // RL_HAVE_CUPTI

}  // namespace rl::cuda
