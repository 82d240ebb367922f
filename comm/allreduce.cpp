// The allreduce algorithm (a row of comm/algorithm_table.inc): the transport's own sum of the fp32 values (MPI's,
// NCCL's), so it carries the identity codec only; the small tensors' latency path (a log2 N message tree).
#include <cmath>

#include "comm/collective_kit.h"
#include "core/trace.h"

namespace octet {

namespace {

void allreduce_run(Transport& tr, Span<float> xs, const ReduceOptions& opt, ReduceState&, CommStats& stats) {
  const int N = tr.size();
  {
    // The transport's own sum (non-blocking under MPI, so the overlap thread can yield while small tensors reduce;
    // why fp32 defaults to scatter_allgather nonetheless: docs/design_notes.md).
    TraceSpan sp("transport", opt.what, &stats.communicate_s);
    if (N > 1) tr.allreduce_sum(xs, opt.progress);
  }
  const uint64_t ring = N > 1 ? static_cast<uint64_t>(2.0 * (N - 1) / N * 4.0 * static_cast<double>(xs.size)) : 0;
  stats.bytes_sent += ring;
  stats.fp32_bytes += ring;
}

}  // namespace

// log2 N latency rounds; a ring's 2(N-1)/N of the fp32 tensor; no codec work.
AlgorithmDef allreduce_algorithm() {
  return {Algorithm::Allreduce,
          "allreduce",
          [](const CodecTraits& t) { return t.identity; },
          "fp32 only (the transport sums the values)",
          false,
          false,
          [](double N) { return std::ceil(std::log2(N)); },
          [](double N, double payload) { return 2 * (N - 1) / N * payload; },
          [](double, double) { return 0.0; },
          [](double, double) { return 0.0; },
          allreduce_run};
}

}  // namespace octet
