// Backend's default asynchronous staging: backends whose ops run synchronously on the host (CPU) copy at once.
#include "backend/backend.h"

#include <cstdlib>
#include <cstring>

#include "core/check.h"
#include "core/log.h"

namespace rl {

void* Backend::alloc_pinned(size_t nbytes) {
  void* p = std::malloc(nbytes ? nbytes : 1);
  RL_CHECK_MSG(p != nullptr, "out of host memory (%zu bytes)", nbytes);
  return p;
}

void Backend::free_pinned(void* p) { std::free(p); }

void Backend::upload_async(void* dst, const void* pinned_src, size_t nbytes) { upload(dst, pinned_src, nbytes); }

void Backend::download_async(void* pinned_dst, const void* src, size_t nbytes) {
  download(pinned_dst, src, nbytes);
}

void Backend::upload_many_async(const PinnedUpload* uploads, size_t num_uploads, const PendingIds* pending) {
  for (size_t i = 0; i < num_uploads; ++i) upload_async(uploads[i].dst, uploads[i].pinned_src, uploads[i].nbytes);
  if (pending != nullptr) resolve_pending_ids(pending->ids, pending->sampled);
}

Status Backend::start_kernel_trace() {
  return Status::error("per-kernel timelines (--profile-kernels) need the CUDA backend; " + name() + " has none");
}

uint64_t Backend::record_marker() {
  double t = now_seconds();
  uint64_t bits;
  std::memcpy(&bits, &t, sizeof bits);
  return bits;
}

double Backend::marker_seconds(uint64_t marker) {
  double t;
  std::memcpy(&t, &marker, sizeof t);
  return t;
}

}  // namespace rl

namespace rl {

// Models check supports_mla() at load, so reaching these is a bug.
void Backend::mla_prepare(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                          const MlaRopeParams&, const Tensor&, const KvLayer&) {
  RL_CHECK_MSG(false, "%s: mla_prepare is not implemented", name().c_str());
}

void Backend::embedding_shard(const Tensor&, const Tensor&, int64_t, const Tensor&) {
  RL_CHECK_MSG(false, "%s: embedding_shard is not implemented", name().c_str());
}

void Backend::copy_columns(const Tensor&, int64_t, const Tensor&, int64_t, int64_t) {
  RL_CHECK_MSG(false, "%s: copy_columns is not implemented", name().c_str());
}

void Backend::head_linear(const Tensor&, int64_t, const Tensor&, const Tensor&, int64_t) {
  RL_CHECK_MSG(false, "%s: head_linear is not implemented", name().c_str());
}

void Backend::mla_attention(const Tensor&, const KvLayer&, const AttentionMetadata&, const MlaLayout&,
                            const Tensor&) {
  RL_CHECK_MSG(false, "%s: mla_attention is not implemented", name().c_str());
}

}  // namespace rl
