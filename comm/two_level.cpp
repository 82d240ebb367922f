// The two-level reduction of comm/two_level.h: node reduce-scatter (fp32), cross-node compressed exchange of the
// owned shard, node all-gather.
#include "comm/two_level.h"

#include <climits>

#include "comm/collective_kit.h"
#include "core/error.h"
#include "core/launch.h"
#include "core/tensor_ops.h"
#include "core/trace.h"

namespace octet {

std::vector<int64_t> node_shards(int64_t n, int L) { return scatter_chunks(n, L); }

namespace {

int as_count(int64_t bytes) {
  OCTET_CHECK(bytes <= INT_MAX, "two-level reduction: " << bytes << " bytes exceed the transport's int count");
  return static_cast<int>(bytes);
}

// The node's fp32 reduce-scatter: each rank's chunk j of x goes as it is (no payload copy, no header) to local rank
// j, which adds the L-1 chunks it receives to its own (its own first, then the others in rank order).
void node_reduce_scatter(Transport& node, Span<float> xs, const std::vector<int64_t>& lo, ReduceState& st,
                         const ReduceOptions& opt, Exec& ex, CommStats& stats) {
  const int L = node.size(), l = node.rank();
  const Device d = ex.device();
  const int64_t mine = lo[l + 1] - lo[l];
  if (st.recv.device() != d) st.recv = Buffer<uint8_t>(0, d);
  st.recv.resize(static_cast<size_t>(4 * mine * L) + 16);
  st.send_counts.assign(L, 0), st.send_displs.assign(L, 0), st.recv_counts.assign(L, 0), st.recv_displs.assign(L, 0);
  for (int j = 0; j < L; ++j) {
    st.send_displs[j] = as_count(4 * lo[j]);
    st.recv_displs[j] = as_count(4 * mine * j);
    if (j == l) continue;
    st.send_counts[j] = as_count(4 * (lo[j + 1] - lo[j]));
    st.recv_counts[j] = as_count(4 * mine);
  }
  {
    TraceSpan sp("transport", opt.what, &stats.communicate_s);
    node.alltoallv_bytes({reinterpret_cast<const uint8_t*>(xs.data), 4 * xs.size, d}, st.send_counts.data(),
                         st.send_displs.data(), {st.recv.data(), st.recv.size(), d}, st.recv_counts.data(),
                         st.recv_displs.data(), opt.progress);
  }
  stats.node_bytes += 4 * static_cast<uint64_t>(static_cast<int64_t>(xs.size) - mine);
  kit::PhaseSpan sp(ex, "reduce", opt.what, &stats.decompress_s, false);
  for (int j = 0; j < L; ++j)
    if (j != l)
      launch_twin("add (node reduce-scatter)", add_into_cpu, OCTET_CUDA_TWIN(add_into_cuda),
                  d == Device::CPU ? Stream{} : ex.comm(), xs.data + lo[l],
                  reinterpret_cast<const float*>(st.recv.data() + st.recv_displs[j]), mine);
}

}  // namespace

void reduce_mean_two_level(const Levels& lv, Span<float> xs, const ReduceOptions& opt, TwoLevelState& st,
                           CommStats& stats) {
  OCTET_CHECK(lv.node && lv.cross, "two-level reduction without its node and cross-node transports");
  Transport& node = *lv.node;
  Transport& cross = *lv.cross;
  const int L = node.size(), l = node.rank(), M = cross.size();
  Exec& ex = opt.exec ? *opt.exec : Exec::host();
  const Device d = ex.device();
  const int64_t n = static_cast<int64_t>(xs.size);
  const std::vector<int64_t> lo = node_shards(n, L);
  const Span<float> shard{xs.data + lo[l], static_cast<size_t>(lo[l + 1] - lo[l]), d};
  // On a device the node's sums and the cross exchange's codec ops report their faults and device times at the end.
  CodecChecksDeferred checks(ex);

  // 1. The node's sum of shard l lands on local rank l (fp32, no error feedback).
  CommStats node_stats;
  if (L > 1) node_reduce_scatter(node, xs, lo, st.node, opt, ex, node_stats);

  // 2. The compressed exchange of that shard with the peers of the same local index (every peer's shard has the same
  //    length, so an empty one is skipped by all of them alike).
  if (shard.size > 0) {
    ReduceOptions copt = opt;
    copt.average = false;
    reduce_mean(cross, shard, copt, st.cross, stats);
    if (opt.average) {
      const float inv = 1.0f / static_cast<float>(L * M);
      launch_twin("scale (mean over ranks)", scale_into_cpu, OCTET_CUDA_TWIN(scale_into_cuda),
                  d == Device::CPU ? Stream{} : ex.comm(), shard.data, shard.data, inv,
                  static_cast<int64_t>(shard.size));
    }
  }

  // 3. Every local rank's reduced shard to the whole node.
  if (L > 1) {
    TraceSpan sp("transport", opt.what, &node_stats.communicate_s);
    std::vector<int> counts(static_cast<size_t>(L)), displs(static_cast<size_t>(L));
    for (int j = 0; j < L; ++j) counts[j] = static_cast<int>(lo[j + 1] - lo[j]), displs[j] = static_cast<int>(lo[j]);
    node.allgatherv_floats(xs, counts.data(), displs.data(), opt.progress);
    node_stats.node_bytes += 4 * static_cast<uint64_t>(n - static_cast<int64_t>(shard.size));
  }
  stats.communicate_s += node_stats.communicate_s;
  stats.decompress_s += node_stats.decompress_s;
  stats.node_bytes += node_stats.node_bytes;
  kit::add_device_phases(checks.finish(), stats);
}

}  // namespace octet
