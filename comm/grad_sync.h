// Data-parallel gradient averaging: a per-tensor plan (codec, algorithm, error-feedback state) built from the
// compression config, executed over the {name, value, grad} params after backward; plus the cross-rank
// parameter checksum and the initial weight broadcast.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/collectives.h"
#include "comm/courier.h"
#include "comm/exchange.h"
#include "comm/powersgd.h"
#include "comm/staged_transport.h"
#include "comm/two_level.h"
#include "compress/compression_config.h"
#include "layers/layer.h"

namespace octet {

struct SyncTensor {
  Param param;
  std::string layer;                       // layer name (matches overrides)
  std::string kind;                        // layer kind (conv, fc, ...): traffic is reported per kind
  WeightKind weights = WeightKind::Other;  // from the layer's traits: codec defaults (params_for_layer), cost ratios
  size_t layer_index = 0;                  // position in the model: the overlap plan orders buckets by it
};

class GradSync {
 public:
  // exec: where the gradients are. On a GPU the codecs run there on its comm stream and only their payloads leave it:
  // the transports must take the device's buffers (NCCL, or MPI staged through page-locked host memory: make_transports
  // in comm/staged_transport.h builds them so); release() makes the compute stream wait for the results.
  // levels (both set: parallel.hierarchy two_level): every tensor above the small-tensor bound goes through
  // reduce_mean_two_level over the node and cross-node transports instead of reduce_mean over t.
  // chunk_mb: parallel.chunk_mb, the pipelined pieces of large tensors (pipeline_piece: < 0 automatic, 0 off); their
  // transfers run on a courier thread of this GradSync's own.
  GradSync(Transport& t, const CompressionConfig& cfg, std::vector<SyncTensor> tensors, Exec& exec = Exec::host(),
           Levels levels = {}, double chunk_mb = -1);
  // Replaces every grad with its mean over the ranks (identical bytes everywhere), then release().
  void sync(uint64_t step, CommStats& stats);
  // The same for the tensors idx (what sync() does for all of them; the overlap thread calls it per bucket, once the
  // bucket's gradients are final): those under min_numel (fp32, MPI's allreduce) in one allreduce over a buffer they
  // are copied into and back from (compression.fuse_small; the same sums, element for element), the others each
  // through its exchange in turn. cancel: non-null makes the waits sleep between polls and throw once it is set (the
  // overlap thread).
  void sync_set(const std::vector<size_t>& idx, uint64_t step, CommStats& stats,
                const std::atomic<bool>* cancel = nullptr);
  // The compute stream waits for every exchanged gradient to be back on the device (no host wait; CPU: nothing).
  void release();
  Exec& exec() const { return exec_; }
  size_t size() const { return entries_.size(); }
  const SyncTensor& tensor(size_t i) const { return entries_[i].t; }
  std::string plan() const;   // one line per tensor: name, numel, codec, algorithm
  uint64_t checksum() const;  // hash of every parameter value on this rank
  // Gathers every rank's checksum; throws naming the step and the ranks when they differ.
  void verify_identical(int64_t step) const;
  void broadcast_values(int root);  // rank root's parameter values to all
  // This rank's error-feedback residuals, named "<param>.residual" / "<param>.owner_residual" (PowerSGD:
  // "<param>.powersgd_error" and its warm-start "<param>.powersgd_q"): the per-rank state a checkpoint must hold for an
  // exact resume (allocated, zero or seeded, from construction on).
  std::vector<std::pair<std::string, Tensor*>> feedback_state();
  // Cumulative payload vs fp32 bytes per layer kind, over the tensors that go through a codec other than none.
  std::map<std::string, std::pair<uint64_t, uint64_t>> bytes_by_kind() const;

 private:
  struct Entry {
    SyncTensor t;
    CodecPtr codec;      // the tensor's codec (PowerSGD's tensors: fp32 before its start step)
    ReduceOptions opt;   // codec, algorithm, error feedback and pieces; each step's seed and progress
    ExchangePtr ex;      // flat, two-level or PowerSGD (comm/exchange.h)
    CommStats total;     // since construction
    bool fused = false;  // under min_numel with compression.fuse_small: in the shared allreduce
  };
  void sync_one(size_t i, uint64_t step, CommStats& stats, const std::atomic<bool>* cancel);
  // The fused tensors among idx in one allreduce (fused_ holds them in turn).
  void sync_fused(const std::vector<size_t>& idx, uint64_t step, CommStats& stats, const std::atomic<bool>* cancel);
  Transport& t_;
  Exec& exec_;
  Levels levels_;                     // two-level: the node and cross-node transports, else empty
  std::unique_ptr<Courier> courier_;  // pipelined pieces' transfers (made when a tensor has some)
  std::vector<Entry> entries_;
  Tensor fused_;             // [sum of the fused tensors' values] on exec_'s device
  ReduceOptions fused_opt_;  // allreduce (the transport's fp32 sum)
  ReduceState fused_state_;
};

}  // namespace octet
