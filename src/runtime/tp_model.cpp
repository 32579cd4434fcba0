#include "runtime/tp_model.h"

#include <algorithm>
#include <thread>

#include "core/log.h"
#ifdef RIDGELINE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/nccl_communicator.h"
#include "backend/cuda/tp_support.h"
#endif

namespace rl {

RankThreads::RankThreads(int32_t num_ranks) {
  RL_CHECK(num_ranks >= 1);
  for (int32_t r = 1; r < num_ranks; ++r) threads_.emplace_back([this, r] { loop(r); });
}

RankThreads::~RankThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void RankThreads::loop(int32_t rank) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int32_t)>* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    (*job)(rank);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

void RankThreads::run(const std::function<void(int32_t)>& fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    pending_ = static_cast<int32_t>(threads_.size());
    ++generation_;
  }
  start_cv_.notify_all();
  fn(0);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
}

namespace {

// The first failure among the ranks' statuses, named by rank.
Status first_error(const std::vector<Status>& st) {
  for (size_t r = 0; r < st.size(); ++r) {
    if (!st[r].is_ok()) return Status::error("tensor-parallel rank " + std::to_string(r) + ": " + st[r].message());
  }
  return Status::ok();
}

#ifdef RIDGELINE_CUDA
// The bytes a staged batch occupies: every field lies in the runner's one staging buffer (model_runner.h), the
// window groups' block tables inside group 0's rows.
std::pair<const char*, size_t> batch_extent(const ForwardBatch& b) {
  const char* lo = nullptr;
  const char* hi = nullptr;
  auto cover = [&](const Tensor& t) {
    if (!t.data) return;
    const char* p = static_cast<const char*>(t.data);
    lo = lo ? std::min(lo, p) : p;
    hi = hi ? std::max(hi, p + t.nbytes()) : p + t.nbytes();
  };
  for (const Tensor* t : {&b.input_ids, &b.positions, &b.slot_mapping, &b.logits_indices, &b.attn.cu_seqlens_q,
                          &b.attn.seq_lens_k, &b.attn.block_tables, &b.logits_q.cu_seqlens_q}) {
    cover(*t);
  }
  for (const Tensor& t : b.window_slot_mapping) cover(t);
  return {lo, lo ? static_cast<size_t>(hi - lo) : 0};
}
#endif

}  // namespace

Result<std::unique_ptr<TpModel>> TpModel::create(const ModelConfig& c, const std::string& model_dir, Backend* rank0,
                                                 const std::string& device, const BackendOptions& backend_opts,
                                                 const LoadOptions& opts, int32_t n) {
  if (n < 2) return Status::error("a tensor-parallel model has at least 2 ranks, got " + std::to_string(n));
  if (opts.quantize_int8) return Status::error("--tensor-parallel-size > 1 does not take int8 weights yet");
  std::unique_ptr<TpModel> m(new TpModel());
  m->ranks_.resize(static_cast<size_t>(n));
  for (int32_t r = 0; r < n; ++r) {
    Rank& rk = m->ranks_[static_cast<size_t>(r)];
    RL_ASSIGN_OR_RETURN(rk.tp.plan, tp_plan_for(c, n, r));
    rk.tp.dims = tp_shard_dims(c);
  }
  m->cuda_ = rank0->device() == DeviceKind::kCuda;
  m->threads_ = std::make_unique<RankThreads>(n);
  m->ranks_[0].be = rank0;

  // Backends of ranks 1.., each made on its own thread (a CUDA backend binds the thread that makes it).
  std::vector<Status> st(static_cast<size_t>(n), Status::ok());
  m->threads_->run([&](int32_t r) {
    if (r == 0) return;
    Rank& rk = m->ranks_[static_cast<size_t>(r)];
    BackendOptions bo = backend_opts;
    bo.device_index = backend_opts.device_index + r;
    auto be = create_backend(device, bo);
    if (!be.is_ok()) {
      st[static_cast<size_t>(r)] = Status::error(be.message());
      return;
    }
    rk.owned = std::move(be).value();
    rk.owned->set_deterministic(rank0->deterministic());
    rk.be = rk.owned.get();
  });
  RL_RETURN_IF_ERROR(first_error(st));

  if (m->cuda_) {
#ifdef RIDGELINE_CUDA
    std::vector<CudaBackend*> cb;
    for (Rank& rk : m->ranks_) cb.push_back(static_cast<CudaBackend*>(rk.be));
    RL_ASSIGN_OR_RETURN(m->comms_, cuda::make_nccl_group(cb));
    cuda::bind_thread(*cb[0]);
    m->handoff_ = std::make_shared<cuda::PeerHandoff>(*cb[0]);
#else
    return Status::error("tensor parallelism on CUDA needs a CUDA build");
#endif
  } else {
    m->comms_ = parallel::make_host_group(n);
  }
  for (int32_t r = 0; r < n; ++r) m->ranks_[static_cast<size_t>(r)].tp.comm = m->comms_[static_cast<size_t>(r)].get();

  // Every rank loads its shard straight from the safetensors, at once.
  m->threads_->run([&](int32_t r) {
    Rank& rk = m->ranks_[static_cast<size_t>(r)];
    m->bind(r);
    LoadOptions lo = opts;
    lo.tp = &rk.tp;
    auto model = build_model(c, model_dir, rk.be, lo);
    if (!model.is_ok()) {
      st[static_cast<size_t>(r)] = Status::error(model.message());
      return;
    }
    rk.model = std::move(model).value();
  });
  RL_RETURN_IF_ERROR(first_error(st));
  log_info("tensor parallel: " + m->describe());
  return m;
}

TpModel::~TpModel() {
  if (!threads_) return;
  // Each rank's device objects go on its own thread; the communicators after the models that use them, the
  // backends last.
  threads_->run([this](int32_t r) {
    Rank& rk = ranks_[static_cast<size_t>(r)];
    bind(r);
    rk.kv.reset();
    rk.staging.reset();
    rk.model.reset();
  });
  handoff_.reset();
  comms_.clear();
  threads_->run([this](int32_t r) {
    if (r > 0) ranks_[static_cast<size_t>(r)].owned.reset();
  });
  if (cuda_) bind(0);
}

void TpModel::bind(int32_t rank) const {
#ifdef RIDGELINE_CUDA
  const Backend* be = ranks_[static_cast<size_t>(rank)].be;  // null when creation failed before it was made
  if (cuda_ && be) cuda::bind_thread(*static_cast<const CudaBackend*>(be));
#else
  (void)rank;
#endif
}

std::string TpModel::describe() const {
  const ModelConfig& c = config();
  const parallel::TpPlan& p = ranks_[0].tp.plan;
  std::string s = std::to_string(tp_size()) + " ranks over " + comms_[0]->name() + "; each rank holds " +
                  std::to_string(p.num_heads) + " of " + std::to_string(c.num_attention_heads) + " heads, " +
                  std::to_string(p.num_kv_heads) + " of " + std::to_string(c.num_kv_heads) + " KV heads";
  if (p.kv_replicas > 1) s += " (each KV head on " + std::to_string(p.kv_replicas) + " ranks)";
  s += ", " + std::to_string(p.intermediate) + " of " + std::to_string(c.intermediate_size) +
       " intermediate columns, " + std::to_string(p.vocab_per_rank) + " vocabulary rows (padded vocabulary " +
       std::to_string(p.padded_vocab) + ")";
  return s;
}

void TpModel::allocate_kv(int64_t num_blocks, int64_t block_size, DType dtype, const KvGroupPlan& plan) {
  threads_->run([&](int32_t r) {
    if (r == 0) return;
    Rank& rk = ranks_[static_cast<size_t>(r)];
    ModelConfig rc = rk.model->config();
    rc.kv_spec = rk.model->kv_spec();
    rk.kv = std::make_unique<KvStorage>(rk.be, rc, num_blocks, block_size, dtype, &plan);
  });
}

void TpModel::reserve(int64_t max_num_tokens, int64_t max_num_logits) {
  threads_->run([&](int32_t r) {
    bind(r);
    ranks_[static_cast<size_t>(r)].model->reserve(max_num_tokens, max_num_logits);
  });
}

ForwardBatch TpModel::rank_batch(int32_t r, const ForwardBatch& b) {
  if (!cuda_ || r == 0) return b;  // the CPU ranks share host memory
#ifdef RIDGELINE_CUDA
  Rank& rk = ranks_[static_cast<size_t>(r)];
  const auto [base, bytes] = batch_extent(b);
  // Sized by the first (and any larger) step: the runner's staging extent is fixed, so this settles at once.
  if (rk.staging.size() < bytes) rk.staging = DeviceBuffer(rk.be, bytes);
  handoff_->copy_after(*static_cast<const CudaBackend*>(rk.be), rk.staging.data(), base, bytes);
  char* to = static_cast<char*>(rk.staging.data());
  auto move = [&](Tensor& t) {
    if (t.data) t.data = to + (static_cast<const char*>(t.data) - base);
  };
  ForwardBatch out = b;
  for (Tensor* t : {&out.input_ids, &out.positions, &out.slot_mapping, &out.logits_indices, &out.attn.cu_seqlens_q,
                    &out.attn.seq_lens_k, &out.attn.block_tables, &out.logits_q.cu_seqlens_q}) {
    move(*t);
  }
  for (Tensor& t : out.window_slot_mapping) move(t);
  for (Tensor& t : out.window_block_tables) move(t);
  return out;
#else
  return b;
#endif
}

// The ranks enqueue the same layers; on CUDA the collectives order their streams: rank r's copy of the staged
// batch precedes its first all-reduce, which rank 0's stream must pass before it reaches the next step's staging
// upload, so rank 0 never overwrites a batch another rank has not copied yet.
Tensor TpModel::forward(const ForwardBatch& batch, std::span<const KvLayer> kv) {
#ifdef RIDGELINE_CUDA
  if (cuda_) {
    bind(0);
    handoff_->record();
  }
#endif
  threads_->run([&](int32_t r) {
    Rank& rk = ranks_[static_cast<size_t>(r)];
    if (r > 0) bind(r);
    const ForwardBatch b = rank_batch(r, batch);
    rk.logits = rk.model->forward(b, r == 0 ? kv : std::span<const KvLayer>(rk.kv->layers()));
  });
  return ranks_[0].logits;
}

}  // namespace rl
