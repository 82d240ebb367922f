// The two-level reduction of comm/two_level.h: node reduce-scatter (fp32), cross-node compressed exchange of the
// owned shard, node all-gather.
#include "comm/two_level.h"

#include "compress/codec.h"
#include "core/error.h"
#include "core/launch.h"
#include "core/tensor_ops.h"
#include "core/trace.h"

namespace octet {

std::vector<int64_t> node_shards(int64_t n, int L) { return scatter_chunks(n, L); }

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

  // 1. The node's sum of shard l lands on local rank l (fp32: the identity codec, no error feedback).
  static const CodecPtr dense = make_codec(CodecParams{.method = identity_codec()});
  CommStats node_stats;
  ReduceOptions nopt = opt;
  nopt.codec = dense.get();
  nopt.algorithm = Algorithm::ScatterAllgather;
  nopt.error_feedback = false;
  nopt.average = false;
  if (L > 1) reduce_scatter(node, xs, lo, nopt, st.node, node_stats);

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
    node_stats.bytes_sent += 4 * static_cast<uint64_t>(n - shard.size);
  }
  stats.compress_s += node_stats.compress_s;
  stats.communicate_s += node_stats.communicate_s;
  stats.decompress_s += node_stats.decompress_s;
  stats.node_bytes += node_stats.bytes_sent;
}

}  // namespace octet
