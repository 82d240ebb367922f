// FcModelParallel: the FC part of a model split by output neurons over the ranks, sub-batch by sub-batch, with the
// activation exchanges through a codec (see fc_model_parallel.h).
#include "parallel/fc_model_parallel.h"

#include <cstring>
#include <sstream>
#include <string>

#include "core/device.h"
#include "core/error.h"
#include "core/tensor_ops.h"

namespace octet {

namespace {

// Columns [lo, lo + cols) of every row of y [M, P] <-> one contiguous block [M, cols] at offset off of block.
void columns_to_block(const Tensor& y, int64_t M, int64_t P, int64_t lo, int64_t cols, Tensor& block, int64_t off,
                      const Stream& s) {
  copy_rows(block, off, cols, y, lo, P, M, cols, s);
}
void block_to_columns(const Tensor& block, int64_t off, int64_t M, int64_t P, int64_t lo, int64_t cols, Tensor& y,
                      const Stream& s) {
  copy_rows(y, lo, P, block, off, cols, M, cols, s);
}

}  // namespace

struct FcModelParallel::Slice {
  size_t layer = 0;
  Param w{}, b{};  // the model's full tensors; b.value == nullptr without bias
  int64_t in = 0, out = 0;
  std::vector<int64_t> lo;               // N+1 row bounds: rank q owns rows [lo[q], lo[q+1])
  std::unique_ptr<FullyConnected> mine;  // this rank's rows
  Param mw{}, mb{};
  Tensor dw_acc, db_acc;  // this rank's gradient rows summed over the sub-batches
  Tensor y;               // [M, rows] this sub-batch's output rows
  Tensor dy;              // [M, rows]
  Tensor y_host;          // y's host mirror on a GPU
  ReduceState st;         // the input-gradient exchange
  int64_t rows(int q) const { return lo[q + 1] - lo[q]; }
};

FcModelParallel::FcModelParallel(Transport& t, Model& model, size_t fc_start, const ModelParallelOptions& o)
    : t_(t),
      model_(model),
      ex_(model.exec()),
      on_device_(on_device(model.exec().device())),
      start_(fc_start),
      options_(o),
      codec_(make_codec(o.codec)) {
  OCTET_CHECK(codec_->traits().for_activations,
              "model parallelism: activation codec "
                  << o.codec.method << " does not suit activations (it needs error feedback; activations cross once)");
  OCTET_CHECK(o.sub_batches >= 1, "model parallelism: sub_batches must be >= 1");
  const int N = t.size(), r = t.rank();
  for (size_t j = fc_start; j < model.size(); ++j) {
    auto* fc = dynamic_cast<FullyConnected*>(&model.layer(j));
    if (!fc) {
      slice_of_.push_back(-1);
      continue;
    }
    auto s = std::make_unique<Slice>();
    s->layer = j;
    auto params = fc->params();
    s->w = params.at(0);
    if (params.size() > 1) s->b = params[1];
    s->out = s->w.value->dim(0), s->in = s->w.value->dim(1);
    OCTET_CHECK(s->out >= N, "model parallelism: layer " << fc->name() << " has " << s->out
                                                         << " outputs, fewer than the " << N << " ranks");
    for (int q = 0; q <= N; ++q) s->lo.push_back(s->out * q / N);
    FcParams p;
    p.in_features = s->in, p.out_features = s->rows(r), p.bias = s->b.value != nullptr;
    s->mine = std::make_unique<FullyConnected>(fc->name(), p);
    s->mine->bind(ex_);
    auto mp = s->mine->params();
    const Device d = ex_.device();
    s->dw_acc = Tensor(Shape{0}, d), s->db_acc = Tensor(Shape{0}, d), s->y = Tensor(Shape{0}, d),
    s->dy = Tensor(Shape{0}, d);
    s->mw = mp.at(0);
    if (mp.size() > 1) s->mb = mp[1];
    slice_of_.push_back(static_cast<int>(slices_.size()));
    slices_.push_back(std::move(s));
  }
  OCTET_CHECK(!slices_.empty(), "model parallelism: no fc layer at or after layer " << fc_start);
  // below_[j]: the FC slice whose owned columns are all that layer j's input gradient must deliver to each rank,
  // when only layers that act column by column lie between the two; -1 otherwise.
  below_.assign(slice_of_.size(), -1);
  auto column_wise = [&](size_t k) { return model.layer(fc_start + k).traits().column_wise; };
  for (size_t j = 1; j < slice_of_.size(); ++j) {
    if (slice_of_[j] < 0) continue;
    size_t k = j - 1;
    while (k > 0 && slice_of_[k] < 0 && column_wise(k)) --k;
    if (slice_of_[k] >= 0) below_[j] = slice_of_[k];
  }
  const Device d = ex_.device();
  dlogits_ = Tensor(Shape{0}, d);
  dx_host_.resize(model.size() - fc_start);
  x0_ = Tensor(Shape{0}, d), dx0_ = Tensor(Shape{0}, d);
}

const Tensor& FcModelParallel::on_host(const Tensor& t, Tensor& mirror) {
  if (!on_device_) return t;
  host_resize(mirror, t.shape());
  mirror.copy_from(t, ex_.compute());
  ex_.sync(ex_.compute());
  return mirror;
}

void FcModelParallel::host_resize(Tensor& t, const Shape& shape) {
  if (on_device_ && (!t.is_pinned() || shape_numel(shape) > t.capacity())) {
    ex_.sync(ex_.compute());  // no copy may still read the storage about to be freed
    t = Tensor::pinned(shape);
  } else {
    t.resize(shape);
  }
}

FcModelParallel::~FcModelParallel() = default;

// The conv->FC input of one sub-batch travels in fixed slots, [payload bytes (8)][labels (m x 4)][payload], so that one
// collective started beside the others carries it while the previous sub-batch computes.
void FcModelParallel::start_prefetch(const float* x, int64_t n, const int32_t* labels, int64_t m, uint64_t seed,
                                     PhaseTimes& times, CommStats& stats) {
  const double t = now_seconds();
  slot_ = 8 + 4 * static_cast<size_t>(m) + codec_->max_bytes(n);
  prefetch_send_.resize(slot_);
  const uint64_t bytes =
      codec_->encode(x, n, prefetch_send_.data() + 8 + 4 * m, {derive_seed(seed, t_.rank()), nullptr});
  std::memcpy(prefetch_send_.data(), &bytes, 8);
  std::memcpy(prefetch_send_.data() + 8, labels, 4 * static_cast<size_t>(m));
  prefetch_recv_.resize(slot_ * static_cast<size_t>(t_.size()));
  OCTET_CHECK(slot_ < (size_t{1} << 31), "model parallelism: a sub-batch's activations exceed 2 GB");
  prefetch_ = t_.start_allgather({prefetch_send_.data(), slot_, Device::CPU},
                                 {prefetch_recv_.data(), prefetch_recv_.size(), Device::CPU}, slot_);
  stats.compress_s += times.add_span(Phase::Compress, t, now_seconds());
  stats.bytes_sent += static_cast<uint64_t>(t_.size() - 1) * bytes;
  stats.fp32_bytes += static_cast<uint64_t>(t_.size() - 1) * 4 * static_cast<uint64_t>(n);
}

void FcModelParallel::poll_prefetch() {
  if (prefetch_) prefetch_->progress();
}

void FcModelParallel::finish_prefetch(float* x, int64_t n, int32_t* labels_all, int64_t m, PhaseTimes& times,
                                      CommStats& stats) {
  double t = now_seconds();
  if (on_device_) ex_.sync(ex_.compute());  // the previous sub-batch's input is no longer being copied up from x
  prefetch_->finish({step_});
  prefetch_.reset();
  double t2 = now_seconds();
  stats.communicate_s += times.add_span(Phase::Wait, t, t2);
  for (int q = 0; q < t_.size(); ++q) {  // every rank decodes every payload, its own included: identical inputs
    const uint8_t* slot = prefetch_recv_.data() + slot_ * static_cast<size_t>(q);
    uint64_t bytes = 0;
    std::memcpy(&bytes, slot, 8);
    OCTET_CHECK(bytes <= slot_ - 8 - 4 * static_cast<size_t>(m),
                "model parallelism: rank " << q << " sent a payload of " << bytes << " bytes in a slot of " << slot_);
    std::memcpy(labels_all + q * m, slot + 8, 4 * static_cast<size_t>(m));
    codec_->decode(slot + 8 + 4 * m, bytes, x + q * n, n, false);
  }
  t = now_seconds();
  stats.decompress_s += times.add_span(Phase::Decompress, t2, t);
}

void FcModelParallel::exchange_gather(const float* mine, int64_t n_mine, const std::vector<int64_t>& n_of, float* all,
                                      uint64_t seed, PhaseTimes& times, CommStats& stats) {
  double t = now_seconds();
  send_.resize(codec_->max_bytes(n_mine));
  const size_t bytes = codec_->encode(mine, n_mine, send_.data(), {derive_seed(seed, t_.rank()), nullptr});
  double t2 = now_seconds();
  stats.compress_s += times.add_span(Phase::Compress, t, t2);
  allgather_payloads(t_, {send_.data(), bytes, Device::CPU}, st_, {step_});
  t = now_seconds();
  stats.communicate_s += times.add_span(Phase::Communicate, t2, t);
  int64_t off = 0;
  for (int q = 0; q < t_.size(); ++q) {  // every rank decodes every payload, its own included: identical inputs
    codec_->decode(st_.recv.data() + st_.recv_displs[q], static_cast<size_t>(st_.recv_counts[q]), all + off, n_of[q],
                   false);
    off += n_of[q];
  }
  t2 = now_seconds();
  stats.decompress_s += times.add_span(Phase::Decompress, t, t2);
  stats.bytes_sent += static_cast<uint64_t>(t_.size() - 1) * bytes;
  stats.fp32_bytes += static_cast<uint64_t>(t_.size() - 1) * 4 * static_cast<uint64_t>(n_mine);
}

LossResult FcModelParallel::step(const Tensor& a, const int32_t* labels, const StepContext& ctx, float grad_scale,
                                 Tensor& da, PhaseTimes& times, CommStats& stats) {
  const Geometry g = begin_step(a, da, ctx);
  const HostInput in = input_on_host(a, labels, g, times);
  auto sub_seed = [&](int k) { return derive_seed(ctx.seed, 0x3f1, ctx.step, static_cast<uint64_t>(k)); };
  const int64_t values = g.sub * g.features;  // one rank's share of a sub-batch's input
  start_prefetch(in.a->data(), values, in.labels, g.sub, derive_seed(sub_seed(0), 0), times, stats);
  LossResult total;
  for (int k = 0; k < options_.sub_batches; ++k) {
    StepContext cx = ctx;
    cx.sample_offset = k * g.all;  // sub-batch-major sample numbering for the FC part's dropout masks
    const uint64_t seed = sub_seed(k);
    const int32_t* labels_all = receive_sub_batch(g, times, stats);
    // Sub-batch k+1's input travels while sub-batch k computes (progressed between layers and by the exchanges).
    if (k + 1 < options_.sub_batches)
      start_prefetch(in.a->data() + (k + 1) * values, values, in.labels + (k + 1) * g.sub, g.sub,
                     derive_seed(sub_seed(k + 1), 0), times, stats);
    forward_part(g, cx, seed, times, stats);
    const LossResult own = loss_and_gradient(g, labels_all, labels + k * g.sub, grad_scale, times);
    total.loss_sum += own.loss_sum, total.correct += own.correct, total.count += own.count;
    const Tensor& dx0 = backward_part(g, seed, times, stats);
    // This rank's samples' rows of the input gradient.
    Tensor da_k = da.view(k * values, {values});
    da_k.copy_from(dx0.view(t_.rank() * values, {values}), ex_.compute());
  }
  write_gradients();
  return total;
}

FcModelParallel::Geometry FcModelParallel::begin_step(const Tensor& a, Tensor& da, const StepContext& ctx) {
  const int K = options_.sub_batches, r = t_.rank();
  step_ = static_cast<int64_t>(ctx.step);
  Geometry g;
  g.batch = a.dim(0), g.sub = g.batch / K, g.features = a.numel() / g.batch, g.all = t_.size() * g.sub;
  OCTET_CHECK(g.batch % K == 0,
              "model parallelism: batch " << g.batch << " is not divisible into " << K << " sub-batches");
  OCTET_CHECK(a.device() == ex_.device() && da.device() == ex_.device(),
              "model parallelism: the FC part's input is on " << device_name(a.device()) << ", its gradient on "
                                                              << device_name(da.device()) << ", the model runs on "
                                                              << device_name(ex_.device()));
  g.input = a.shape();
  g.input[0] = g.all;
  const Stream cs = ex_.compute();
  for (auto& s : slices_) {  // this rank's rows of the current parameters; fresh gradient sums
    s->mw.value->copy_from(s->w.value->view(s->lo[r] * s->in, s->mw.value->shape()), cs);
    if (s->b.value) s->mb.value->copy_from(s->b.value->view(s->lo[r], s->mb.value->shape()), cs);
    s->dw_acc.resize(s->mw.value->shape()), s->dw_acc.zero(cs);
    if (s->b.value) s->db_acc.resize(s->mb.value->shape()), s->db_acc.zero(cs);
  }
  da.resize(a.shape());
  labels_all_.resize(static_cast<size_t>(g.all));
  return g;
}

// The encoders read this rank's activations and labels on the host.
FcModelParallel::HostInput FcModelParallel::input_on_host(const Tensor& a, const int32_t* labels, const Geometry& g,
                                                          PhaseTimes& times) {
  HostInput in{&a, labels};
  if (on_device_) {
    labels_host_.resize(static_cast<size_t>(g.batch));
    copy_async(labels_host_.data(), labels, 4 * static_cast<size_t>(g.batch), CopyKind::DeviceToHost, ex_.compute());
    in.labels = labels_host_.data();
    if (labels_all_dev_.device() != ex_.device()) labels_all_dev_ = Buffer<int32_t>(0, ex_.device());
    labels_all_dev_.resize(static_cast<size_t>(g.all));
  }
  ScopedPhase sp(times, Phase::Forward);  // on a GPU: the layers below finishing, a and the labels copied down
  in.a = &on_host(a, a_host_);
  return in;
}

// The prefetched input of the sub-batch into x0_ (through its host mirror on a device); returns every rank's labels
// of it where the model runs.
const int32_t* FcModelParallel::receive_sub_batch(const Geometry& g, PhaseTimes& times, CommStats& stats) {
  x0_.resize(g.input);
  Tensor& x0_h = on_device_ ? x0_host_ : x0_;
  host_resize(x0_h, g.input);
  finish_prefetch(x0_h.data(), g.sub * g.features, labels_all_.data(), g.sub, times, stats);
  if (!on_device_) return labels_all_.data();
  x0_.copy_from(x0_h, ex_.compute());
  copy_async(labels_all_dev_.data(), labels_all_.data(), 4 * static_cast<size_t>(g.all), CopyKind::HostToDevice,
             ex_.compute());
  return labels_all_dev_.data();
}

// Layers start_.. on the sub-batch, through the model's layer loop: a split layer computes this rank's neurons for
// every sample, and the ranks' slices are gathered (codec) into the whole output; the others run as they are.
void FcModelParallel::forward_part(const Geometry& g, const StepContext& cx, uint64_t seed, PhaseTimes& times,
                                   CommStats& stats) {
  const int N = t_.size(), r = t_.rank();
  model_.forward_range(x0_, start_, model_.size(), cx, [&](size_t i, const Tensor& x, Tensor& y) {
    poll_prefetch();
    const size_t j = i - start_;
    if (slice_of_[j] < 0) {
      ScopedPhase sp(times, Phase::Forward);
      model_.layer(i).forward(x, y, cx);
      return true;
    }
    Slice& s = *slices_[slice_of_[j]];
    const Tensor* y_h;
    {
      ScopedPhase sp(times, Phase::Forward);
      s.y.resize({g.all, s.rows(r)});
      s.mine->forward(x, s.y, cx);
      y_h = &on_host(s.y, s.y_host);
    }
    std::vector<int64_t> n_of(N);
    for (int q = 0; q < N; ++q) n_of[q] = g.all * s.rows(q);
    host_resize(gathered_, {g.all * s.out});
    exchange_gather(y_h->data(), g.all * s.rows(r), n_of, gathered_.data(), derive_seed(seed, 1 + j), times, stats);
    for (int q = 0; q < N; ++q)  // rank q's block [all, rows_q] -> columns [lo_q, lo_q+1) of y
      block_to_columns(gathered_, g.all * s.lo[q], g.all, s.out, s.lo[q], s.rows(q), y, ex_.compute());
    return true;
  });
}

// The loss over every rank's samples (whose gradient backward takes) and over this rank's own (what it reports).
LossResult FcModelParallel::loss_and_gradient(const Geometry& g, const int32_t* labels_all, const int32_t* labels_own,
                                              float grad_scale, PhaseTimes& times) {
  const Tensor& logits = model_.activation(model_.size() - 1);  // [all, classes], whole on every rank
  const int64_t C = logits.dim(1);
  LossResult own;
  {
    ScopedPhase sp(times, Phase::Forward);
    loss_all_.forward(logits, labels_all, ex_);
    own = loss_own_.forward(logits.view(t_.rank() * g.sub * C, {g.sub, C}), labels_own, ex_);
  }
  dlogits_.resize(logits.shape());
  loss_all_.backward(dlogits_, grad_scale, ex_);
  return own;
}

// Layers start_.. backward through the model's layer loop; returns the summed gradient w.r.t. x0_ (on the host on a
// device), whose rows of this rank's samples are all it reads.
const Tensor& FcModelParallel::backward_part(const Geometry& g, uint64_t seed, PhaseTimes& times, CommStats& stats) {
  const Tensor* dx0_h = nullptr;
  model_.backward_range(x0_, start_, model_.size(), dlogits_, &dx0_,
                        [&](size_t i, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
                          poll_prefetch();
                          const size_t j = i - start_;
                          if (slice_of_[j] < 0) {
                            ScopedPhase sp(times, Phase::Backward);
                            model_.layer(i).backward(x, y, dy, dx);
                            return true;
                          }
                          Slice& s = *slices_[slice_of_[j]];
                          Tensor* dx_h = nullptr;
                          {
                            ScopedPhase sp(times, Phase::Backward);
                            const int64_t rows = s.rows(t_.rank());
                            s.dy.resize({g.all, rows});
                            columns_to_block(dy, g.all, s.out, s.lo[t_.rank()], rows, s.dy, 0, ex_.compute());
                            s.mine->backward(x, s.y, s.dy, dx);
                            add_into(s.dw_acc, *s.mw.grad, ex_);
                            if (s.b.value) add_into(s.db_acc, *s.mb.grad, ex_);
                            if (j == 0 || below_[j] < 0)
                              dx_h = &on_host(*dx, dx_host_[j]);  // the exchange below sums it in place
                          }
                          sum_input_gradient(g, j, s, *dx, dx_h, derive_seed(seed, 1000 + j), times, stats);
                          if (j == 0) dx0_h = dx_h;
                          return true;
                        });
  return *dx0_h;
}

// dx holds this rank's part of split layer j's input gradient (its neurons' contribution): the ranks' parts are summed.
// Each rank needs only a share of the sum, so a reduce-scatter delivers just that (half an allreduce's traffic): for
// the first FC layer the rows of its own samples (its conv layers' backward), for a later one the columns of the FC
// layer below that it owns (the layers between act column by column; the other columns are zeroed and no rank reads
// them). Other cases sum everything.
void FcModelParallel::sum_input_gradient(const Geometry& g, size_t j, Slice& s, Tensor& dx, Tensor* dx_h, uint64_t seed,
                                         PhaseTimes& times, CommStats& stats) {
  const int N = t_.size();
  const Stream cs = ex_.compute();
  CommStats c;
  ReduceOptions ro{Algorithm::ScatterAllgather, codec_.get(), false, seed};
  ro.average = false;
  ro.progress.step = step_;
  std::vector<int64_t> bounds(static_cast<size_t>(N) + 1);
  if (j == 0) {
    for (int q = 0; q <= N; ++q) bounds[q] = q * g.sub * g.features;
    reduce_scatter(t_, span_of(*dx_h), bounds, ro, s.st, c);
  } else if (below_[j] >= 0) {
    const Slice& b = *slices_[below_[j]];
    const int64_t P = dx.numel() / g.all;  // dx [all, P]: P = b.out
    {
      ScopedPhase sp(times, Phase::Compress);
      host_resize(packed_, {g.all * P});
      for (int q = 0; q < N; ++q) columns_to_block(dx, g.all, P, b.lo[q], b.rows(q), packed_, g.all * b.lo[q], cs);
      ex_.sync(cs);
    }
    for (int q = 0; q <= N; ++q) bounds[q] = g.all * b.lo[q];
    reduce_scatter(t_, span_of(packed_), bounds, ro, s.st, c);
    ScopedPhase sp(times, Phase::Decompress);
    dx.zero(cs);
    const int r = t_.rank();
    block_to_columns(packed_, g.all * b.lo[r], g.all, P, b.lo[r], b.rows(r), dx, cs);
  } else {
    reduce_mean(t_, span_of(*dx_h), ro, s.st, c);
    if (on_device_) dx.copy_from(*dx_h, cs);
  }
  times.add(Phase::Compress, c.compress_s), times.add(Phase::Communicate, c.communicate_s),
      times.add(Phase::Decompress, c.decompress_s);
  stats += c;
}

// The full gradients: this rank's rows (the optimizer updates no others), zero elsewhere. They summed all N*B samples
// at grad_scale (1/B), so 1/N makes them the global mean, as averaging makes the layers below.
void FcModelParallel::write_gradients() {
  const Stream cs = ex_.compute();
  const int r = t_.rank();
  const float inv = 1.0f / static_cast<float>(t_.size());
  for (auto& s : slices_) {
    s->w.grad->zero(cs);
    Tensor gw = s->w.grad->view(s->lo[r] * s->in, s->dw_acc.shape());
    scale_into(gw, s->dw_acc, inv, ex_);
    if (s->b.value) {
      s->b.grad->zero(cs);
      Tensor gb = s->b.grad->view(s->lo[r], s->db_acc.shape());
      scale_into(gb, s->db_acc, inv, ex_);
    }
  }
}

void FcModelParallel::gather(const std::vector<std::pair<std::string, Tensor*>>& optimizer_state) {
  const int N = t_.size();
  auto rows_allgather = [&](const Slice& s, Tensor& t) {
    const int64_t len = t.numel() / s.out;
    std::vector<int> counts(N), displs(N);
    for (int q = 0; q < N; ++q) {
      OCTET_CHECK(s.lo[q + 1] * len < (int64_t{1} << 31),
                  "model parallelism: tensor of " << t.numel() << " values is too large to gather");
      counts[q] = static_cast<int>(s.rows(q) * len), displs[q] = static_cast<int>(s.lo[q] * len);
    }
    Tensor mirror;  // on a GPU the rows travel through the host (gather runs at evaluations and checkpoints only)
    Tensor& h = on_host(t, mirror);
    t_.allgatherv_floats(span_of(h), counts.data(), displs.data(), {step_});
    if (on_device_) t.copy_from(h, ex_.compute()), ex_.sync(ex_.compute());
  };
  for (auto& s : slices_) {
    for (const Param* p : {&s->w, &s->b}) {
      if (!p->value) continue;
      rows_allgather(*s, *p->value);
      for (const auto& [name, t] : optimizer_state)
        if (name.rfind(p->name, 0) == 0 && name.size() > p->name.size() && t->numel() == p->value->numel())
          rows_allgather(*s, *t);
    }
  }
}

std::vector<FcModelParallel::Owned> FcModelParallel::owned() const {
  std::vector<Owned> out;
  const int r = t_.rank();
  for (const auto& s : slices_) {
    out.push_back({s->w.name, s->lo[r] * s->in, s->rows(r) * s->in});
    if (s->b.value) out.push_back({s->b.name, s->lo[r], s->rows(r)});
  }
  return out;
}

std::string FcModelParallel::plan() const {
  std::ostringstream o;
  for (const auto& s : slices_) {
    o << "  " << model_.layer(s->layer).name() << ": " << s->out << " outputs over " << t_.size() << " ranks, rows";
    for (int q = 0; q < t_.size(); ++q) o << (q ? " | " : " ") << s->lo[q] << "-" << s->lo[q + 1] - 1;
    o << "\n";
  }
  o << "  " << options_.sub_batches << " sub-batch" << (options_.sub_batches > 1 ? "es" : "")
    << " per step, activations through " << codec_->name();
  return o.str();
}

}  // namespace octet
