#include "parallel/communicator.h"

#include <algorithm>
#include <barrier>
#include <cstring>

#include "core/check.h"
#include "core/dtype.h"

namespace rl::parallel {
namespace {

// The rendezvous of a host group: each rank posts its tensor, then works on the posted set.
struct HostGroup {
  explicit HostGroup(int n) : size(n), sync(n), posted(static_cast<size_t>(n)), outs(static_cast<size_t>(n)) {}
  int size;
  std::barrier<> sync;
  std::vector<Tensor> posted;  // per rank: the input of the collective in progress
  std::vector<Tensor> outs;    // per rank: the output (all_gather)
  std::vector<float> sum;      // all_reduce_sum's f32 result, one slice reduced by each rank
};

std::string describe(const Tensor& t) {
  std::string s = std::string(dtype_name(t.dtype)) + "[";
  for (int i = 0; i < t.ndim; ++i) {
    if (i > 0) s += ',';
    s += std::to_string(t.shape[i]);
  }
  return s + "]";
}

float load(const Tensor& t, int64_t i) {
  return t.dtype == DType::kF32 ? t.as<float>()[i] : bf16_to_f32(t.as<uint16_t>()[i]);
}

class HostCommunicator final : public Communicator {
 public:
  HostCommunicator(std::shared_ptr<HostGroup> g, int rank) : g_(std::move(g)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return g_->size; }
  std::string name() const override { return "host group of " + std::to_string(g_->size); }

  Status all_reduce_sum(const Tensor& x) override {
    g_->posted[static_cast<size_t>(rank_)] = x;
    g_->sync.arrive_and_wait();  // 1: every input posted
    const Status st = check_same("all_reduce_sum", /*float_only=*/true);
    const int64_t n = x.numel();
    if (st.is_ok() && rank_ == 0) g_->sum.resize(static_cast<size_t>(n));
    g_->sync.arrive_and_wait();  // 2: every rank checked (and agrees), the scratch is sized
    if (!st.is_ok()) return st;
    const int64_t begin = n * rank_ / g_->size, end = n * (rank_ + 1) / g_->size;
    for (int64_t i = begin; i < end; ++i) {
      float acc = load(g_->posted[0], i);
      for (int r = 1; r < g_->size; ++r) acc += load(g_->posted[static_cast<size_t>(r)], i);
      g_->sum[static_cast<size_t>(i)] = acc;
    }
    g_->sync.arrive_and_wait();  // 3: every slice reduced; from here nobody reads the inputs
    if (x.dtype == DType::kF32) {
      std::memcpy(x.data, g_->sum.data(), static_cast<size_t>(n) * 4);
    } else {
      uint16_t* dst = x.as<uint16_t>();
      for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(g_->sum[static_cast<size_t>(i)]);
    }
    g_->sync.arrive_and_wait();  // 4: every rank copied the result out before the scratch is reused
    return Status::ok();
  }

  Status all_gather(const Tensor& in, const Tensor& out) override {
    g_->posted[static_cast<size_t>(rank_)] = in;
    g_->outs[static_cast<size_t>(rank_)] = out;
    g_->sync.arrive_and_wait();  // 1: every input posted
    Status st = check_same("all_gather", /*float_only=*/false);
    for (int r = 0; r < g_->size && st.is_ok(); ++r) {  // every rank checks every output: one verdict
      const Tensor& o = g_->outs[static_cast<size_t>(r)];
      if (o.dtype != in.dtype || o.numel() != in.numel() * g_->size) {
        st = Status::error("all_gather: rank " + std::to_string(r) + " has output " + describe(o) + " for " +
                           std::to_string(g_->size) + " inputs " + describe(in));
      }
    }
    // Each rank writes only its own output, reading the posted inputs, which nobody writes.
    if (st.is_ok()) {
      const size_t bytes = in.nbytes();
      for (int r = 0; r < g_->size; ++r) {
        std::memcpy(static_cast<char*>(out.data) + bytes * static_cast<size_t>(r),
                    g_->posted[static_cast<size_t>(r)].data, bytes);
      }
    }
    g_->sync.arrive_and_wait();  // 2: every output written
    return st;
  }

 private:
  // Every rank checks every posted tensor against rank 0's, so all ranks reach the same verdict.
  Status check_same(const char* op, bool float_only) const {
    const Tensor& ref = g_->posted[0];
    for (int r = 0; r < g_->size; ++r) {
      const Tensor& t = g_->posted[static_cast<size_t>(r)];
      if (float_only && t.dtype != DType::kF32 && t.dtype != DType::kBF16) {
        return Status::error(std::string(op) + ": rank " + std::to_string(r) + " has " + describe(t) +
                             " (f32 or bf16 only)");
      }
      if (t.dtype != ref.dtype || t.numel() != ref.numel()) {
        return Status::error(std::string(op) + ": rank " + std::to_string(r) + " has " + describe(t) + ", rank 0 " +
                             describe(ref));
      }
    }
    return Status::ok();
  }

  std::shared_ptr<HostGroup> g_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_host_group(int n) {
  RL_CHECK_MSG(n >= 1, "a group needs at least one rank, got %d", n);
  auto g = std::make_shared<HostGroup>(n);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < n; ++r) out.push_back(std::make_unique<HostCommunicator>(g, r));
  return out;
}

}  // namespace rl::parallel
