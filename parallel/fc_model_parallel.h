// Model parallelism for the FC layers (Krizhevsky's "one weird trick", as Dettmers used it): the layers below the
// first FC layer run data parallel; every FC layer from there on is split by output neurons over the ranks. Per
// sub-batch (each rank's B/K samples), the conv->FC activations are all-gathered through the activation codec, each
// rank computes its neurons for all N*B/K samples (while sub-batch k+1's input is already on its way), the slices are
// all-gathered (codec) into the next layer's input,
// the logits end whole on every rank, and backward sums the partial input gradients with a compressed reduce-scatter
// (each rank receives the share it needs: its samples' rows at the conv boundary, its columns between FC layers).
// Every rank decodes the same bytes, so the whole FC part sees identical inputs everywhere.
// On a device (a GPU, or the simulated one) the FC part computes on the model's device and every exchange goes through
// page-locked host buffers, where the activation codec runs (Debian's Open MPI is not CUDA-aware): each activation
// block is copied down once the compute stream has produced it, and what comes back is copied up on the same stream.
#pragma once
#include <memory>
#include <vector>

#include "comm/collectives.h"
#include "comm/transport.h"
#include "core/timer.h"
#include "layers/fc.h"
#include "layers/model.h"
#include "layers/softmax_ce.h"

namespace octet {

struct ModelParallelOptions {
  int sub_batches = 1;  // K: the batch is cut into K sub-batches that pass the FC part one after another
  CodecParams codec;    // activations and their gradients (no error feedback: each value crosses once)
};

class FcModelParallel {
 public:
  // fc_start: index of the first FC layer (the model's layers from there on are split); the model keeps its full
  // FC tensors, of which each rank trains its own rows.
  FcModelParallel(Transport& t, Model& model, size_t fc_start, const ModelParallelOptions& o);
  ~FcModelParallel();

  // a: this rank's output of layer fc_start-1 (or its input batch when fc_start == 0), [B, ...], B divisible by K;
  // labels: B; both on the model's device. Runs the FC part forward and backward for all N*B samples, writes this
  // rank's rows of every FC gradient (other rows zero) and da (the gradient w.r.t. a), and returns the loss over this
  // rank's B samples. grad_scale multiplies dloss/dlogits: 1/B, the scale of data parallelism, whose averaging then
  // makes da's layers see the global-batch mean; the FC gradients are divided by N to match. Phases go to times,
  // traffic to stats.
  LossResult step(const Tensor& a, const int32_t* labels, const StepContext& ctx, float grad_scale, Tensor& da,
                  PhaseTimes& times, CommStats& stats);
  // Brings every rank's rows of the FC parameters (and of the given optimizer state tensors, matched by parameter
  // name prefix) into the full tensors on every rank: before evaluation, checkpoints and the end of training.
  void gather(const std::vector<std::pair<std::string, Tensor*>>& optimizer_state);
  std::string plan() const;  // one line per FC layer: rows per rank
  // {parameter name, first value, count} of the FC values this rank owns: the only ones its optimizer must update.
  struct Owned {
    std::string name;
    int64_t offset, count;
  };
  std::vector<Owned> owned() const;

 private:
  struct Slice;
  // A step's sizes: batch B (this rank's), sub = B/K, all = N*B/K (a sub-batch of every rank), features of one sample
  // of the FC part's input, and that input's shape for a sub-batch, [all, ...].
  struct Geometry {
    int64_t batch = 0, sub = 0, all = 0, features = 0;
    Shape input;
  };
  struct HostInput {  // what the prefetch encodes: this rank's input and labels, on the host
    const Tensor* a;
    const int32_t* labels;
  };
  // The parts of step(), in order.
  Geometry begin_step(const Tensor& a, Tensor& da, const StepContext& ctx);
  HostInput input_on_host(const Tensor& a, const int32_t* labels, const Geometry& g, PhaseTimes& times);
  const int32_t* receive_sub_batch(const Geometry& g, PhaseTimes& times, CommStats& stats);
  void forward_part(const Geometry& g, const StepContext& cx, uint64_t seed, PhaseTimes& times, CommStats& stats);
  LossResult loss_and_gradient(const Geometry& g, const int32_t* labels_all, const int32_t* labels_own,
                               float grad_scale, PhaseTimes& times);
  const Tensor& backward_part(const Geometry& g, uint64_t seed, PhaseTimes& times, CommStats& stats);
  void sum_input_gradient(const Geometry& g, size_t j, Slice& s, Tensor& dx, Tensor* dx_h, uint64_t seed,
                          PhaseTimes& times, CommStats& stats);
  void write_gradients();
  void exchange_gather(const float* mine, int64_t n_mine, const std::vector<int64_t>& n_of, float* all, uint64_t seed,
                       PhaseTimes& times, CommStats& stats);
  void start_prefetch(const float* x, int64_t n, const int32_t* labels, int64_t m, uint64_t seed, PhaseTimes& times,
                      CommStats& stats);
  void poll_prefetch();
  void finish_prefetch(float* x, int64_t n, int32_t* labels_all, int64_t m, PhaseTimes& times, CommStats& stats);
  // t itself on the CPU; on a GPU, its page-locked mirror filled once the compute stream has produced t (the host
  // waits for it).
  const Tensor& on_host(const Tensor& t, Tensor& mirror);
  Tensor& on_host(Tensor& t, Tensor& mirror) {
    return const_cast<Tensor&>(on_host(static_cast<const Tensor&>(t), mirror));
  }
  // A host buffer of shape: page-locked on a GPU, where it grows only after the compute stream's copies from it end.
  void host_resize(Tensor& t, const Shape& shape);

  Transport& t_;
  Model& model_;
  Exec& ex_;        // the model's: where the FC part computes
  bool on_device_;  // ex_ is a device (GPU or simulated): exchanges go through the host buffers below
  size_t start_;
  ModelParallelOptions options_;
  CodecPtr codec_;
  std::vector<std::unique_ptr<Slice>> slices_;  // one per FC layer of the FC part
  std::vector<int> slice_of_;                   // layer index - start -> slice index or -1
  std::vector<int> below_;                      // layer index - start -> slice below whose columns its dx needs, or -1
  // Buffers of one sub-batch on the model's device: x0_ the FC part's input [N*B/K, ...], dx0_ the gradient w.r.t.
  // it, dlogits_ the gradient w.r.t. the logits (the layers' outputs and gradients are the model's own buffers).
  Tensor x0_, dx0_, dlogits_;
  // Host buffers: gathered_ an exchange's decoded result, packed_ column blocks of an input gradient; on a GPU also
  // the mirrors of a, x0_ and the summed input gradients.
  Tensor gathered_, packed_, a_host_, x0_host_;
  std::vector<Tensor> dx_host_;
  std::vector<int32_t> labels_host_, labels_all_;
  Buffer<int32_t> labels_all_dev_;  // on the model's device
  std::vector<uint8_t> send_;
  std::unique_ptr<Transport::Pending> prefetch_;  // the conv->FC input gather in flight, beside the blocking exchanges
  std::vector<uint8_t> prefetch_send_, prefetch_recv_;
  size_t slot_ = 0;
  int64_t step_ = -1;  // the step being run (names it in wait timeouts)
  ReduceState st_;
  SoftmaxCrossEntropy loss_all_, loss_own_;
};

}  // namespace octet
