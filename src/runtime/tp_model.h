// Tensor parallelism in one process (docs/distributed.md): N ranks, one thread each, each with its own backend,
// its shard of every weight (LoadOptions::tp) and of the KV heads, joined by a parallel::Communicator (the host
// group on the CPU, NCCL on CUDA). TpModel is the Model the engine sees: the scheduler, the KV block manager, the
// runner and the sampler run once, on rank 0's backend; forward() hands the same ForwardBatch to every rank, runs
// rank 0 on the calling thread and ranks 1.. on theirs, and returns rank 0's logits (the whole vocabulary, since
// the lm_head logits are all-gathered). One rank (N = 1) never builds a TpModel: the engine runs the plain model.
//
// Invariants: rank r's backend, model, KV cache and staging are created, used and destroyed on rank r's thread
// (rank 0's backend is the engine's); every rank runs every forward() (a rank that skipped one would hang the
// group's collectives); the ranks' KV caches have the same blocks, groups and dtype, so one block table serves all.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "model/model.h"
#include "parallel/communicator.h"
#include "runtime/backend_factory.h"
#include "runtime/kv_storage.h"

namespace rl {

namespace cuda {
class PeerHandoff;
}

// Threads for ranks 1..N-1 (rank 0 is the caller's). run(fn) calls fn(r) for every rank at once and returns
// when all have returned.
class RankThreads {
 public:
  explicit RankThreads(int32_t num_ranks);
  ~RankThreads();
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;
  void run(const std::function<void(int32_t rank)>& fn);
  int32_t size() const { return static_cast<int32_t>(threads_.size()) + 1; }

 private:
  void loop(int32_t rank);

  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int32_t)>* job_ = nullptr;  // under mu_
  uint64_t generation_ = 0;                             // under mu_: bumped per run()
  int32_t pending_ = 0;                                 // under mu_: ranks 1.. still running the job
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

class TpModel final : public Model {
 public:
  // Builds every rank's shard of the model (in parallel, one thread per rank): rank 0 on `rank0` (the caller's
  // backend, which must outlive this model), rank r >= 1 on a backend made like rank 0's (`backend_opts`, CUDA
  // device r). Errors: a size that does not divide the model (tp_plan_for), an architecture without tensor
  // parallelism, int8 weights, a device that does not exist, a failing rank's load.
  static Result<std::unique_ptr<TpModel>> create(const ModelConfig& config, const std::string& model_dir,
                                                 Backend* rank0, const std::string& device,
                                                 const BackendOptions& backend_opts, const LoadOptions& opts,
                                                 int32_t tp_size);
  ~TpModel() override;

  int32_t tp_size() const { return static_cast<int32_t>(ranks_.size()); }
  const parallel::TpPlan& plan(int32_t rank) const { return ranks_[static_cast<size_t>(rank)].tp.plan; }
  std::string communicator_name() const { return comms_[0]->name(); }
  // One line for logs and inspect: ranks, collective, what each rank holds.
  std::string describe() const;

  // The KV caches of ranks 1..N-1 (rank 0's is the engine's KvStorage): num_blocks of block_size tokens in
  // `dtype`, laid out by `plan` (made from kv_spec(), the same on every rank).
  void allocate_kv(int64_t num_blocks, int64_t block_size, DType dtype, const KvGroupPlan& plan);

  // Model: the whole model's config; rank 0's backend; per-rank weight bytes, KV spec (its KV heads) and
  // workspace; forward() returns rank 0's logits [num_logits, vocab_size].
  const ModelConfig& config() const override { return ranks_[0].model->config(); }
  Backend& backend() const override { return *ranks_[0].be; }
  uint64_t weight_bytes() const override { return ranks_[0].model->weight_bytes(); }
  std::vector<KvLayerSpec> kv_spec() const override { return ranks_[0].model->kv_spec(); }
  uint64_t workspace_bytes(int64_t max_num_tokens, int64_t max_num_logits) const override {
    return ranks_[0].model->workspace_bytes(max_num_tokens, max_num_logits);
  }
  void reserve(int64_t max_num_tokens, int64_t max_num_logits) override;
  Tensor forward(const ForwardBatch& batch, std::span<const KvLayer> kv) override;

 private:
  struct Rank {
    std::unique_ptr<Backend> owned;  // ranks >= 1
    Backend* be = nullptr;
    TensorParallel tp;
    std::unique_ptr<Model> model;
    std::unique_ptr<KvStorage> kv;  // ranks >= 1
    DeviceBuffer staging;           // CUDA ranks >= 1: this step's batch, copied from rank 0's device
    Tensor logits;
  };
  TpModel() = default;
  // CUDA: makes the calling thread's device rank r's (no-op on the CPU).
  void bind(int32_t rank) const;
  // The batch as rank r sees it: the same views on the CPU; on CUDA, the staged bytes copied to its device.
  ForwardBatch rank_batch(int32_t rank, const ForwardBatch& b);

  std::vector<Rank> ranks_;
  std::vector<std::unique_ptr<parallel::Communicator>> comms_;
  std::unique_ptr<RankThreads> threads_;
  // CUDA: rank 0's stream → the other ranks' staging copies (shared_ptr: the type is complete in CUDA builds only)
  std::shared_ptr<cuda::PeerHandoff> handoff_;
  bool cuda_ = false;
};

}  // namespace rl
