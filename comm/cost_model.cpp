// The exchange cost model (comm/cost_model.h): a tensor's predicted sync time, flat and two-level, and the link probe.
#include "comm/cost_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "comm/collectives.h"
#include "comm/mpi_transport.h"
#include "core/error.h"
#include "core/timer.h"

namespace octet {

namespace {

// One flat data-parallel gradient sync of one tensor of n values in a layer of the given kind (ms): messages *
// latency + bytes over the busiest link / bandwidth + codec time, each from the algorithm's row (comm/collectives.h:
// scatter_allgather sends 2(N-1) messages carrying 2(N-1)/N of the payload, allgather N-1 carrying N-1 payloads).
// Tensors under min_numel: the allreduce row, fp32. With L ranks on a node, the share (N-L)/(N-1) of each rank's bytes
// leaves the node, L ranks' worth through the node's link; the rest moves inside it.
double flat_sync_ms(int64_t numel, WeightKind kind, const CodecProfile& c, const Link& l, int N, int64_t min_numel) {
  const double fp32 = 4.0 * static_cast<double>(numel), lat = l.latency_us * 1e-3, n = N;
  const double L = std::min(std::max(l.ranks_per_node, 1), N);
  // ms for `bytes` sent by every rank to peers spread evenly over the job: the node's link, or inside the node.
  auto wire = [&](double bytes) {
    if (L <= 1 || n <= 1) return ms_for_bytes(bytes, l.bandwidth_gbs);
    const double off = bytes * (n - L) / (n - 1);
    return std::max(ms_for_bytes(L * off, l.bandwidth_gbs), ms_for_bytes(bytes - off, l.node_bandwidth_gbs));
  };
  const bool small = numel < min_numel;
  const AlgorithmDef& a = algorithm_def(small ? Algorithm::Allreduce : parse_algorithm(c.algorithm));
  const double payload = small ? fp32 : fp32 * c.ratio_for(kind);
  return a.messages(n) * lat + wire(a.sent(n, payload)) + ms_for_bytes(a.encoded(n, fp32), c.encode_gbs) +
         ms_for_bytes(a.decoded(n, fp32), c.decode_gbs);
}

}  // namespace

double median(std::vector<double>& v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

double tensor_sync_ms(int64_t numel, WeightKind kind, const CodecProfile& c, const Link& l, int N, int64_t min_numel) {
  const int L = std::min(std::max(l.ranks_per_node, 1), N);
  if (!l.two_level || L <= 1 || N / L <= 1 || numel < min_numel) return flat_sync_ms(numel, kind, c, l, N, min_numel);
  // The node steps: (L-1) messages each way, (L-1)/L of the fp32 tensor each way inside the node.
  const double fp32 = 4.0 * static_cast<double>(numel), lat = l.latency_us * 1e-3;
  const double node = 2 * (L - 1) * lat + 2 * ms_for_bytes(fp32 * (L - 1) / L, l.node_bandwidth_gbs);
  // The shard among the nodes: one rank per node on the link, but all L local ranks at once share it.
  Link cross = l;
  cross.ranks_per_node = 1;
  cross.bandwidth_gbs = l.bandwidth_gbs / L;
  return node + flat_sync_ms((numel + L - 1) / L, kind, c, cross, N / L, 0);
}

// The link as octet's collectives see it, all ranks taking part: codec-none scatter-allgather of 1K values (each
// 2(N-1) messages: latency) and of `probe` values, the model's largest layer (2(N-1)/N of it sent per rank:
// bandwidth), each the median of several. On hosts shared by several ranks this includes their scheduling, which a
// point-to-point ping-pong would miss. A link's effective bandwidth depends on the message size (a shaped link
// with a burst allowance passes smaller messages faster; protocols change with size), hence probes of the sizes
// that carry the traffic: the largest layer for gradients and, when `act_probe` > 0, model parallelism's largest
// activation collective (the same messages: N chunks of it) for the activation exchanges.
Link measure_link(const World& w, int64_t probe, int64_t act_probe, double compute_ms) {
  CodecPtr none = make_codec({.method = identity_codec()});
  MpiTransport transport(w);
  const ReduceOptions opt{Algorithm::ScatterAllgather, none.get(), false, 0};
  ReduceState st;
  // work > 0: each rank first computes `work` multiply-adds, so the ranks arrive as they do after compute. loop > 1:
  // that many exchanges back to back, timed together (the time of one).
  auto median_time = [&](int64_t n, int reps, int64_t work = 0, int loop = 1) {
    std::vector<float> x(static_cast<size_t>(n), 1.0f);
    std::vector<double> t;
    for (int r = -1; r < reps; ++r) {
      CommStats stats;
      CHECK_MPI(MPI_Barrier(w.comm));
      volatile double acc = 1;
      for (int64_t i = 0; i < work; ++i) acc = acc * 0.999999 + 1e-9;
      const double t0 = now_seconds();
      for (int k = 0; k < loop; ++k) reduce_mean(transport, {x.data(), x.size(), Device::CPU}, opt, st, stats);
      double dt = (now_seconds() - t0) / loop;
      CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, w.comm));
      if (r >= 0) t.push_back(dt);
    }
    return median(t);
  };
  const double n = w.size, big = static_cast<double>(std::max<int64_t>(probe, 65536));
  const double t_small = median_time(1024, 21), t_big = median_time(static_cast<int64_t>(big), 7);
  // The same small exchange right after compute_ms of compute on every rank (as long as what model parallelism
  // computes between two exchanges; each rank calibrates its loop while all run): what it takes beyond t_small is
  // the ranks' arrival skew, paid by every exchange that follows compute.
  const int64_t calib = 1 << 18;
  CHECK_MPI(MPI_Barrier(w.comm));
  const double c0 = now_seconds();
  {
    volatile double acc = 1;
    for (int64_t i = 0; i < calib; ++i) acc = acc * 0.999999 + 1e-9;
  }
  const double per_ms = static_cast<double>(calib) / std::max(1e-9, 1e3 * (now_seconds() - c0));
  const double t_after = median_time(1024, 21, static_cast<int64_t>(std::max(0.01, compute_ms) * per_ms));
  Link l;
  auto gbs = [&](double values, double t) { return 2 * (n - 1) / n * 4 * values / std::max(1e-9, t - t_small) / 1e9; };
  l.latency_us = 1e6 * t_small / (2 * (n - 1));
  l.bandwidth_gbs = gbs(big, t_big);
  l.sync_us = 1e6 * std::max(0.0, t_after - t_small);
  // The activation exchanges follow one another within the FC part as a stream of ~the largest layer's bytes per
  // step, so their probe runs back to back in blocks that carry as much as the large probe: one exchange at a time
  // after a pause would pass much of its bytes in the burst a shaped link allows after idling.
  const double act = static_cast<double>(std::max<int64_t>(act_probe, 4096));
  const int loop = static_cast<int>(std::clamp(std::round(big / act), 1.0, 64.0));
  if (act_probe > 0) l.act_bandwidth_gbs = gbs(act, median_time(static_cast<int64_t>(act), 7, 0, loop));
  return l;
}

}  // namespace octet
