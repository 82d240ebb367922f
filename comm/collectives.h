// Reduction algorithms over one fp32 buffer, each usable with any codec and any transport: dense allreduce, compressed
// scatter-reduce + allgather, and compressed allgather with variable-size payloads. All leave every rank with
// bit-identical results (each rank decodes the same bytes in the same order).
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/transport.h"
#include "compress/codec.h"
#include "core/tensor.h"

namespace octet {

// The reduction algorithms, one row each in comm/algorithm_table.inc (AlgorithmDef below).
enum class Algorithm {
#define OCTET_ALGORITHM(id, row) id,
#include "comm/algorithm_table.inc"
#undef OCTET_ALGORITHM
};
const char* algorithm_name(Algorithm a);
Algorithm parse_algorithm(const std::string& name);  // unknown: error listing the known ones
std::vector<std::string> algorithm_names();          // the table's, in its order
Algorithm default_algorithm(const Codec& c);         // the codec's traits().reduction: allgather or scatter-allgather
// "" when algorithm a can carry codec `method` (with traits t); else the one clause a refusal says: what a carries
// and which algorithms would carry the codec.
std::string algorithm_misfit(Algorithm a, const std::string& method, const CodecTraits& t);

struct CommStats {
  double compress_s = 0, communicate_s = 0, decompress_s = 0;
  uint64_t bytes_sent =
      0;  // payload bytes this rank handed to the transport for other ranks (allreduce: ring-equivalent 2(N-1)/N * 4n)
  uint64_t fp32_bytes = 0;  // what the same exchange costs uncompressed with the same algorithm shape
  uint64_t node_bytes = 0;  // two-level: fp32 bytes this rank sent to the ranks of its node (not in bytes_sent)
  CommStats& operator+=(const CommStats& o);
};

// Reusable buffers for one tensor's exchanges (sized on first use, on the device the values are on).
struct ReduceState {
  Tensor residual;                      // error feedback of this rank's contribution [n] (empty without feedback)
  Tensor owner_residual;                // scatter-allgather: error feedback of the reduced chunk this rank owns [chunk]
  Tensor scratch;                       // error feedback's and the owner step's temporaries [3n]
  Buffer<uint8_t> send, recv, reduced;  // payloads (reduced: the owner's re-encoded chunk)
  std::vector<int> send_counts, send_displs, recv_counts, recv_displs;
  std::vector<ReduceState> pieces;  // a pipelined reduction's ring of buffers (the residuals above stay whole)
};

struct ReduceOptions {
  Algorithm algorithm = Algorithm::Allreduce;
  const Codec* codec = nullptr;  // required except for Allreduce
  bool error_feedback = false;
  uint64_t seed = 0;           // keys stochastic codecs; combine step and tensor into it
  Progress progress = {};      // step (for timeout errors), yield (overlap thread), cancel
  bool average = true;         // false: leave the sum (model parallelism sums partial input gradients)
  const char* what = nullptr;  // the tensor's name in the trace's encode / transport / decode spans
  Exec* exec = nullptr;        // where the values are and the codecs run (null: the host); a GPU's comm stream
  // Pipelined chunks (where the transport pipelines the buffers: Transport::pieces_on): the tensor goes in pieces of
  // this many values (0: one piece), each piece's encoding, transfers and decoding a stage of a software pipeline; with
  // a courier, piece k's bytes move on its thread while piece k+1 encodes and piece k-1 decodes. One piece gives the
  // unpipelined reduction, bytes and all.
  int64_t piece = 0;
  class Courier* courier = nullptr;
};

// An algorithm's row (comm/algorithm_table.inc; each defined in its own file): what config, GradSync, reduce_mean,
// compression auto, predict and bench know of it.
struct AlgorithmDef {
  Algorithm id;
  const char* name;
  bool (*fits)(const CodecTraits&);  // the codecs it can carry, by their traits
  const char* carries;               // the same in words, for a refusal
  bool feedback;                     // keeps error feedback on this rank's payload for a codec that wants it
  bool owner_residual;               // and on the reduced chunk this rank owns (ReduceState::owner_residual)
  // One flat exchange among N ranks of a tensor of fp32 bytes whose payload is `payload` bytes (comm/cost_model.h):
  // the messages each rank sends (latencies), the bytes it sends, and the fp32 bytes it encodes and decodes.
  double (*messages)(double N);
  double (*sent)(double N, double payload);
  double (*encoded)(double N, double fp32);
  double (*decoded)(double N, double fp32);
  // The sum over the ranks into x, identical bytes on every rank (reduce_mean checks, allocates the feedback state and
  // scales around it). A codec-carrying algorithm runs in opt.piece pieces where set (comm/pipeline.h).
  void (*run)(Transport& t, Span<float> x, const ReduceOptions& opt, ReduceState& st, CommStats& stats);
};
const std::vector<AlgorithmDef>& algorithm_table();
const AlgorithmDef& algorithm_def(Algorithm a);

// Tensors below this many values keep one piece under the automatic choice (the latency path).
constexpr int64_t kPipelineMin = int64_t{1} << 20;
// The piece size for n values (parallel.chunk_mb: < 0 automatic: 64 pieces of at least 1 MB of fp32, none below
// kPipelineMin (4 MB); 0: off; else that many MB of fp32), in whole 4096-value blocks; 0 when n fits one piece.
// (On the test-bed, 1-2 MB pieces reached 93-97% of the wire at 100 Mbit/s and 1 Gbit/s, 4 MB pieces 78-93%.)
int64_t pipeline_piece(int64_t n, double chunk_mb);
// The pieces' bounds over n values (piece <= 0: one piece).
std::vector<int64_t> piece_bounds(int64_t n, int64_t piece);
// Scatter-allgather: how many values rank r of N owns over all pieces (its owner residual's length).
int64_t owned_values(int64_t n, int N, int r, int64_t piece);

// The scatter-allgather's chunks of n values over N ranks: rank j owns [lo[j], lo[j+1]) (N+1 bounds, equal chunks
// rounded up to 64 values, the last one shorter).
std::vector<int64_t> scatter_chunks(int64_t n, int N);
// Whether reductions with these options keep error-feedback state (a residual per tensor and, for scatter-allgather,
// one for the owned chunk).
bool keeps_feedback(const ReduceOptions& opt);

// x <- mean (or, with !opt.average, sum) over ranks of x, identical bytes on every rank. x on opt.exec's device: on a
// GPU the codecs run there and only payload bytes leave it (the transport must accept device buffers: NCCL, or MPI
// staged through pinned host memory, comm/staged_transport.h).
void reduce_mean(Transport& t, Span<float> x, const ReduceOptions& opt, ReduceState& st, CommStats& stats);

// The first half of scatter-allgather on its own: rank q owns x[lo[q], lo[q+1]) (lo: N+1 ascending bounds from 0);
// every rank's chunks go through the codec to their owners, which decode and sum them in rank order (mean with
// opt.average) into their own chunk of x. The rest of x is left as it was. Half the traffic of reduce_mean for
// callers that need only their chunk (model parallelism's partial input gradients, a two-level exchange's node step);
// no error feedback. x on opt.exec's device, as for reduce_mean.
void reduce_scatter(Transport& t, Span<float> x, const std::vector<int64_t>& lo, const ReduceOptions& opt,
                    ReduceState& st, CommStats& stats);

// Every rank's payload (mine) to every rank: st.recv holds them in rank order at st.recv_displs, st.recv_counts their
// sizes.
void allgather_payloads(Transport& t, Span<const uint8_t> mine, ReduceState& st, const Progress& p);

}  // namespace octet
