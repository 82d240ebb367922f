// PowerSGD's parameters, the rule that picks which tensors it compresses and at what rank, and its linear algebra as
// CPU/CUDA twins (oneDNN's sgemm on the CPU, cuBLAS on a GPU; the Gram-Schmidt step a loop of ours on both). Not a
// flat codec: a gradient M (rows x cols) becomes P = M Q and Q = M^T P, each averaged across ranks between the
// products (comm/powersgd.h runs the exchange), so the method sits beside the codec table rather than in it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "compress/codec.h"
#include "core/exec.h"
#include "core/tensor.h"

namespace octet {

constexpr const char* kPowerSgd = "powersgd";
// Every name compression.method accepts: the codec table's rows, then powersgd.
std::vector<std::string> compression_methods();
// Reads the keys of every method into p, each defaulting to p's value: each codec row's reader, then powersgd's
// (for_activations: only the codecs fit for model parallelism's activations). check_method_keys: the first key any of
// them rejects (the config checks each key once, whatever the method: overrides may change it).
void read_method_keys(KeySource& s, CodecParams& p, bool for_activations = false);
std::optional<CodecKeyError> check_method_keys(const CodecParams& p);
// The keys method's own reader reads (a codec row's, or powersgd's; auto: every method's, its candidates' included):
// what a config section may hold for the methods it and its overrides use. And every method's keys with the values
// they take where a section does not give them (inherited: the section's defaults, or the top level's for an
// override).
std::vector<std::string> method_key_names(const std::string& method);
std::vector<std::pair<std::string, double>> method_key_defaults(const CodecParams& inherited);
bool is_low_rank(const std::string& method);
// compression.method auto's candidates, ordered by slot: the codec table's column (compress/codec_table.inc), and
// powersgd (slot 11, from the aggressive policy). method: the codec or powersgd; bits: a variant's (0: the default).
struct Candidate {
  std::string name, method;
  Policy policy;
  int slot, bits;
};
const std::vector<Candidate>& auto_candidates();

// PowerSGD's own parameters (compression.rank, start_step, min_compression_rate; error feedback is always on).
struct PowerSgdParams {
  int rank = 1;                     // columns of P and Q
  int64_t start_step = 1000;        // steps of plain fp32 allreduce first (DDP's start_powerSGD_iter)
  double min_compression_rate = 2;  // tensors that would not shrink by this factor travel as fp32
  float epsilon = 1e-8f;            // added to each column's norm in the orthogonalization (a zero column stays 0)
  std::optional<CodecKeyError> check() const;
  static PowerSgdParams from(const CodecParams& p);
};
std::optional<CodecKeyError> check_powersgd(const CodecParams& p);

// How PowerSGD treats a tensor of this shape: compressed as rows x cols (rows = the first dimension, as DDP views a
// conv weight out x in*k*k) at rank r = min(rank, rows, cols), or not (r = 0: fewer than two dimensions, or
// (rows + cols) * r * min_compression_rate >= rows * cols).
struct LowRankShape {
  int64_t rows = 0, cols = 0;
  int r = 0;
};
LowRankShape low_rank_shape(const Shape& s, const PowerSgdParams& p);

// C (m x n) = op(A) op(B), row-major, op(A) m x k, op(B) k x n; trans_a: A is stored k x m (A^T is used), trans_b: B is
// stored n x k.
void lowrank_gemm_cpu(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool trans_a,
                      bool trans_b, const Stream& s);
void lowrank_gemm_cuda(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool trans_a,
                       bool trans_b, const Stream& s);
// P (rows x r, row-major) orthonormalized column by column (DDP's Gram-Schmidt): column i /= (its norm + eps), then
// removed from the later columns. Sums in double, in row order.
void orthogonalize_cpu(float* p, int64_t rows, int r, float eps, const Stream& s);
void orthogonalize_cuda(float* p, int64_t rows, int r, float eps, const Stream& s);

// The twins on ex's comm stream (CPU at once, the simulated device's queue, a GPU's comm stream).
void lowrank_gemm(Exec& ex, const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool trans_a,
                  bool trans_b);
void orthogonalize(Exec& ex, float* p, int64_t rows, int r, float eps);

}  // namespace octet
