#include "model/weights.h"

#include <algorithm>
#include <cstring>

#include "core/quant.h"
#include "core/random.h"

namespace rl {

Result<std::unique_ptr<WeightLoader>> WeightLoader::create(const std::string& model_dir, Backend* backend,
                                                           const LoadOptions& opts, uint64_t total_bytes) {
  auto w = std::make_unique<WeightLoader>();
  w->backend_ = backend;
  w->opts_ = opts;
  if (!opts.dummy_weights) {
    RL_ASSIGN_OR_RETURN(WeightStore store, WeightStore::open(model_dir));
    w->store_ = std::move(store);
  }
  if (!backend->supports_weight_dtype(opts.weight_dtype)) {
    return Status::error("backend " + backend->name() + " cannot compute with " +
                         std::string(dtype_name(opts.weight_dtype)) + " weights");
  }
  if (opts.quantize_int8 && !backend->supports_weight_dtype(DType::kI8)) {
    return Status::error("backend " + backend->name() +
                         " has no int8 weights (--quantization int8 runs on the CPU backend only)");
  }
  w->progress_ = std::make_unique<ProgressBar>("loading weights", total_bytes);
  return w;
}

bool WeightLoader::has(const std::string& name) const { return !store_ || store_->find(name) != nullptr; }

Result<Tensor> WeightLoader::load(const std::vector<std::string>& names,
                                  const std::vector<std::vector<int64_t>>& shapes, float dummy_scale,
                                  std::optional<float> dummy_fill) {
  return load_impl(names, shapes, dummy_scale, dummy_fill, true);
}

Result<Tensor> WeightLoader::load_unquantized(const std::vector<std::string>& names,
                                              const std::vector<std::vector<int64_t>>& shapes, float dummy_scale) {
  return load_impl(names, shapes, dummy_scale, std::nullopt, false);
}

Result<Tensor> WeightLoader::load_impl(const std::vector<std::string>& names,
                                       const std::vector<std::vector<int64_t>>& shapes, float dummy_scale,
                                       std::optional<float> dummy_fill, bool allow_int8) {
  RL_CHECK(names.size() == shapes.size() && !names.empty());
  const int64_t cols = shapes[0].size() == 2 ? shapes[0][1] : 1;
  int64_t rows = 0;
  for (const auto& s : shapes) {
    RL_CHECK(s.size() == shapes[0].size() && (s.size() == 1 || s[1] == cols));
    rows += s[0];
  }
  if (allow_int8 && opts_.quantize_int8 && shapes[0].size() == 2) return load_int8(names, shapes, dummy_scale, rows, cols);
  const DType dt = opts_.weight_dtype;
  const size_t es = dtype_size(dt);
  DeviceBuffer buf(backend_, static_cast<size_t>(rows * cols) * es);
  Tensor out = shapes[0].size() == 2 ? Tensor(buf.data(), dt, {rows, cols}) : Tensor(buf.data(), dt, {rows});

  int64_t row0 = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const auto& shape = shapes[i];
    Tensor part = out.slice_rows(row0, shape[0]);
    row0 += shape[0];
    if (!store_) {
      ++counter_;
      if (dummy_fill) {
        backend_->fill_uniform(part, counter_, *dummy_fill, *dummy_fill);
      } else {
        backend_->fill_uniform(part, opts_.dummy_seed * 1000003ull + counter_, -dummy_scale, dummy_scale);
      }
      bytes_loaded_ += part.nbytes();
      progress_->update(bytes_loaded_);
      continue;
    }
    const TensorInfo* t = store_->find(names[i]);
    if (!t) return Status::error("weights: tensor \"" + names[i] + "\" not found in the model's safetensors");
    std::vector<int64_t> want = shape;
    if (t->shape != want) {
      std::string ws = "[";
      for (size_t j = 0; j < want.size(); ++j) ws += (j ? ", " : "") + std::to_string(want[j]);
      return Status::error(t->file + ": tensor \"" + names[i] + "\" has shape " + t->shape_str() +
                           " but the config implies " + ws + "]");
    }
    if (t->dtype != DType::kF32 && t->dtype != DType::kBF16 && t->dtype != DType::kF16) {
      return Status::error(t->file + ": tensor \"" + names[i] + "\" has dtype " +
                           std::string(dtype_name(t->dtype)) + "; a float weight is expected here");
    }
    // Convert on the host into the storage dtype, in chunks, then upload.
    const int64_t n = part.numel();
    constexpr int64_t kChunk = 1 << 22;
    std::vector<float> f32(static_cast<size_t>(std::min(n, kChunk)));
    std::vector<unsigned char> staged(static_cast<size_t>(std::min(n, kChunk)) * es);
    for (int64_t off = 0; off < n; off += kChunk) {
      int64_t cnt = std::min(kChunk, n - off);
      const unsigned char* src = t->data + static_cast<size_t>(off) * dtype_size(t->dtype);
      void* dst = static_cast<char*>(part.data) + static_cast<size_t>(off) * es;
      if (t->dtype == dt) {
        backend_->upload(dst, src, static_cast<size_t>(cnt) * es);
      } else {
        convert_to_f32(src, t->dtype, f32.data(), static_cast<size_t>(cnt));
        convert_from_f32(f32.data(), staged.data(), dt, static_cast<size_t>(cnt));
        backend_->upload(dst, staged.data(), static_cast<size_t>(cnt) * es);
      }
      bytes_loaded_ += static_cast<uint64_t>(cnt) * es;
      progress_->update(bytes_loaded_);
    }
  }
  buffers_.push_back(std::move(buf));
  return out;
}

Result<Tensor> WeightLoader::load_sharded(const std::vector<std::string>& names,
                                          const std::vector<std::vector<int64_t>>& shapes,
                                          const std::vector<parallel::WeightRole>& roles, float dummy_scale) {
  if (!opts_.tp || opts_.tp->plan.tp_size == 1) return load(names, shapes, dummy_scale);
  RL_CHECK(names.size() == shapes.size() && names.size() == roles.size() && !names.empty());
  if (opts_.quantize_int8) return Status::error("int8 weights cannot be sharded for tensor parallelism yet");
  const parallel::TpPlan& plan = opts_.tp->plan;
  std::vector<parallel::Slice> slices;
  int64_t rows = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const int64_t full_cols = shapes[i].size() == 2 ? shapes[i][1] : 1;
    slices.push_back(parallel::shard_slice(plan, opts_.tp->dims, roles[i], shapes[i][0], full_cols));
    RL_CHECK(shapes[i].size() == shapes[0].size() && slices[i].num_cols == slices[0].num_cols);
    rows += slices[i].num_rows;
  }
  const int64_t cols = slices[0].num_cols;
  const DType dt = opts_.weight_dtype;
  const size_t es = dtype_size(dt);
  DeviceBuffer buf(backend_, static_cast<size_t>(rows * cols) * es);
  Tensor out = shapes[0].size() == 2 ? Tensor(buf.data(), dt, {rows, cols}) : Tensor(buf.data(), dt, {rows});
  int64_t row0 = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const parallel::Slice& sl = slices[i];
    const int64_t full_rows = shapes[i][0], full_cols = shapes[i].size() == 2 ? shapes[i][1] : 1;
    // This part as a 2-D [num_rows, cols] view; rows at or past valid_rows are padding.
    Tensor part(static_cast<char*>(out.data) + static_cast<size_t>(row0 * cols) * es, dt, {sl.num_rows, cols});
    row0 += sl.num_rows;
    if (sl.valid_rows < sl.num_rows) {
      backend_->fill_zero(part.slice_rows(sl.valid_rows, sl.num_rows - sl.valid_rows).data,
                          static_cast<size_t>((sl.num_rows - sl.valid_rows) * cols) * es);
    }
    if (!store_) {
      // The whole tensor's values (load()'s counter and seed), then this rank's block of them.
      ++counter_;
      DeviceBuffer whole(backend_, static_cast<size_t>(full_rows * full_cols) * es);
      Tensor w(whole.data(), dt, {full_rows, full_cols});
      backend_->fill_uniform(w, opts_.dummy_seed * 1000003ull + counter_, -dummy_scale, dummy_scale);
      if (sl.valid_rows > 0) {
        backend_->copy_columns(w.slice_rows(sl.row_begin, sl.valid_rows), sl.col_begin,
                               part.slice_rows(0, sl.valid_rows), 0, cols);
      }
      backend_->synchronize();  // `whole` is freed on return
      bytes_loaded_ += part.nbytes();
      progress_->update(bytes_loaded_);
      continue;
    }
    const TensorInfo* t = store_->find(names[i]);
    if (!t) return Status::error("weights: tensor \"" + names[i] + "\" not found in the model's safetensors");
    if (t->shape != shapes[i]) {
      std::string ws = "[";
      for (size_t j = 0; j < shapes[i].size(); ++j) ws += (j ? ", " : "") + std::to_string(shapes[i][j]);
      return Status::error(t->file + ": tensor \"" + names[i] + "\" has shape " + t->shape_str() +
                           " but the config implies " + ws + "]");
    }
    if (t->dtype != DType::kF32 && t->dtype != DType::kBF16 && t->dtype != DType::kF16) {
      return Status::error(t->file + ": tensor \"" + names[i] + "\" has dtype " +
                           std::string(dtype_name(t->dtype)) + "; a float weight is expected here");
    }
    // Only this rank's rows and columns are read from the mapped file: converted on the host a chunk of rows at
    // a time, then uploaded.
    const size_t src_es = dtype_size(t->dtype);
    const int64_t chunk_rows = std::max<int64_t>(1, (int64_t{1} << 22) / std::max<int64_t>(cols, 1));
    std::vector<float> f32(static_cast<size_t>(cols));
    const int64_t staged_rows = std::min(chunk_rows, std::max<int64_t>(sl.valid_rows, 1));
    std::vector<unsigned char> staged(static_cast<size_t>(staged_rows * cols) * es);
    for (int64_t r0 = 0; r0 < sl.valid_rows; r0 += chunk_rows) {
      const int64_t n = std::min(chunk_rows, sl.valid_rows - r0);
      for (int64_t r = 0; r < n; ++r) {
        const unsigned char* src =
            t->data + static_cast<size_t>((sl.row_begin + r0 + r) * full_cols + sl.col_begin) * src_es;
        unsigned char* dst = staged.data() + static_cast<size_t>(r * cols) * es;
        if (t->dtype == dt) {
          std::memcpy(dst, src, static_cast<size_t>(cols) * es);
        } else {
          convert_to_f32(src, t->dtype, f32.data(), static_cast<size_t>(cols));
          convert_from_f32(f32.data(), dst, dt, static_cast<size_t>(cols));
        }
      }
      backend_->upload(part.slice_rows(r0, n).data, staged.data(), static_cast<size_t>(n * cols) * es);
    }
    bytes_loaded_ += part.nbytes();
    progress_->update(bytes_loaded_);
  }
  buffers_.push_back(std::move(buf));
  return out;
}

Result<std::vector<float>> WeightLoader::read_f32(const std::string& name, const std::vector<int64_t>& shape) const {
  const TensorInfo* t = find(name);
  if (!t) return Status::error("weights: tensor \"" + name + "\" not found in the model's safetensors");
  if (t->shape != shape) {
    std::string ws = "[";
    for (size_t j = 0; j < shape.size(); ++j) ws += (j ? ", " : "") + std::to_string(shape[j]);
    return Status::error(t->file + ": tensor \"" + name + "\" has shape " + t->shape_str() +
                         " but the config implies " + ws + "]");
  }
  if (t->dtype != DType::kF32 && t->dtype != DType::kBF16 && t->dtype != DType::kF16) {
    return Status::error(t->file + ": tensor \"" + name + "\" must be f32, f16 or bf16");
  }
  std::vector<float> out(static_cast<size_t>(t->numel()));
  convert_to_f32(t->data, t->dtype, out.data(), out.size());
  return out;
}

Result<Tensor> WeightLoader::load_computed(const std::vector<int64_t>& shape, float dummy_scale,
                                           const std::function<Status(float* dst)>& fill,
                                           std::optional<float> dummy_fill) {
  RL_CHECK(!shape.empty() && shape.size() <= kMaxDims);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const DType dt = opts_.weight_dtype;
  DeviceBuffer buf(backend_, static_cast<size_t>(n) * dtype_size(dt));
  Tensor out(buf.data(), dt, {n});
  out.ndim = static_cast<int>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) out.shape[i] = shape[i];
  if (!store_) {
    ++counter_;
    if (dummy_fill) {
      backend_->fill_uniform(out, counter_, *dummy_fill, *dummy_fill);
    } else {
      backend_->fill_uniform(out, opts_.dummy_seed * 1000003ull + counter_, -dummy_scale, dummy_scale);
    }
  } else {
    std::vector<float> host(static_cast<size_t>(n));
    RL_RETURN_IF_ERROR(fill(host.data()));
    if (dt == DType::kF32) {
      backend_->upload(out.data, host.data(), host.size() * 4);
    } else {
      std::vector<unsigned char> staged(host.size() * dtype_size(dt));
      convert_from_f32(host.data(), staged.data(), dt, host.size());
      backend_->upload(out.data, staged.data(), staged.size());
    }
  }
  bytes_loaded_ += out.nbytes();
  progress_->update(bytes_loaded_);
  buffers_.push_back(std::move(buf));
  return out;
}

Result<Tensor> WeightLoader::load_int8(const std::vector<std::string>& names,
                                       const std::vector<std::vector<int64_t>>& shapes, float dummy_scale,
                                       int64_t rows, int64_t cols) {
  std::vector<char> host(i8_weight_bytes(rows, cols), 0);
  int8_t* q = reinterpret_cast<int8_t*>(host.data());
  float* scale = reinterpret_cast<float*>(host.data() + i8_scale_offset(rows, cols));
  int32_t* row_sum = reinterpret_cast<int32_t*>(host.data() + i8_row_sum_offset(rows, cols));
  std::vector<float> row(static_cast<size_t>(cols));
  int64_t row0 = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const int64_t part_rows = shapes[i][0];
    const TensorInfo* t = nullptr;
    if (store_) {
      t = store_->find(names[i]);
      if (!t) return Status::error("weights: tensor \"" + names[i] + "\" not found in the model's safetensors");
      if (t->shape != shapes[i]) {
        return Status::error(t->file + ": tensor \"" + names[i] + "\" has shape " + t->shape_str() +
                             " but the config implies [" + std::to_string(shapes[i][0]) + ", " +
                             std::to_string(cols) + "]");
      }
    } else {
      ++counter_;
    }
    for (int64_t r = 0; r < part_rows; ++r) {
      if (t) {
        convert_to_f32(t->data + static_cast<size_t>(r * cols) * dtype_size(t->dtype), t->dtype, row.data(),
                       static_cast<size_t>(cols));
      } else {  // the values fill_uniform gives the same tensor in the unquantised path
        const uint64_t seed = opts_.dummy_seed * 1000003ull + counter_;
        for (int64_t c = 0; c < cols; ++c) {
          const float u = uniform_from_counter(seed, static_cast<uint64_t>(r * cols + c));
          row[static_cast<size_t>(c)] = -dummy_scale + 2 * dummy_scale * u;
        }
      }
      const int64_t g = row0 + r;
      quantize_row_i8(row.data(), cols, q + g * cols, scale + g, row_sum + g);
    }
    row0 += part_rows;
    bytes_loaded_ += static_cast<uint64_t>(part_rows * cols);
    progress_->update(bytes_loaded_);
  }
  DeviceBuffer buf(backend_, host.size());
  backend_->upload(buf.data(), host.data(), host.size());
  Tensor out(buf.data(), DType::kI8, {rows, cols});
  buffers_.push_back(std::move(buf));
  return out;
}

void WeightLoader::finish() { progress_->finish(); }

}  // namespace rl
