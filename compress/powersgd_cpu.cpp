// PowerSGD on the CPU: its parameters and their checks, the compressibility rule, the method list, and the CPU twins of
// its linear algebra (oneDNN's row-major sgemm; Gram-Schmidt in double), with the dispatch to a device's twins.
#include <dnnl.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "compress/powersgd.h"
#include "core/error.h"
#include "core/launch.h"

namespace octet {

std::vector<std::string> compression_methods() {
  std::vector<std::string> out;
  for (const auto& e : codec_registry()) out.push_back(e.name);
  out.push_back(kPowerSgd);
  return out;
}

bool is_low_rank(const std::string& method) { return method == kPowerSgd; }

const std::vector<Candidate>& auto_candidates() {
  static const std::vector<Candidate> all = [] {
    std::vector<Candidate> c = {{kPowerSgd, kPowerSgd, Policy::Aggressive, 11, 0}};
    for (const auto& e : codec_registry())
      for (const AutoCandidate& a : e.candidates)
        c.push_back({a.name ? a.name : e.name, e.name, a.policy, a.slot, a.bits});
    std::sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) { return a.slot < b.slot; });
    for (size_t i = 0; i < c.size(); ++i)  // slots 0, 1, ... each once: a gap or a repeat is a table error
      OCTET_CHECK(c[i].slot == static_cast<int>(i), "compress/codec_table.inc: auto candidate "
                                                        << c[i].name << " has slot " << c[i].slot << ", expected "
                                                        << i);
    return c;
  }();
  return all;
}

PowerSgdParams PowerSgdParams::from(const CodecParams& p) {
  PowerSgdParams q;
  q.rank = p.rank;
  q.start_step = p.start_step;
  q.min_compression_rate = p.min_compression_rate;
  return q;
}

std::optional<CodecKeyError> PowerSgdParams::check() const {
  if (rank < 1 || rank > 1024) return CodecKeyError{"rank", "must be in [1, 1024], got " + std::to_string(rank)};
  if (start_step < 0) return CodecKeyError{"start_step", "must be >= 0, got " + std::to_string(start_step)};
  if (!(min_compression_rate >= 1.0 && min_compression_rate <= 1e6))
    return CodecKeyError{"min_compression_rate", "must be in [1, 1e6], got " + std::to_string(min_compression_rate)};
  return std::nullopt;
}

std::optional<CodecKeyError> check_powersgd(const CodecParams& p) { return PowerSgdParams::from(p).check(); }

void read_method_keys(KeySource& s, CodecParams& p, bool for_activations) {
  for (const auto& e : codec_registry())
    if (!for_activations || e.traits.for_activations) e.read(s, p);
  if (for_activations) return;
  p.rank = s.small_integer("rank", p.rank);
  p.start_step = s.integer("start_step", p.start_step);
  p.min_compression_rate = s.number("min_compression_rate", p.min_compression_rate);
}

namespace {

// A key source that notes the keys a reader asks for, with the defaults it gives, and gives those back.
class KeyNames final : public KeySource {
 public:
  std::vector<std::string> keys;
  std::vector<double> dflts;
  int64_t integer(const char* key, int64_t dflt) override { return note(key, static_cast<double>(dflt)), dflt; }
  double number(const char* key, double dflt) override { return note(key, dflt), dflt; }
  [[noreturn]] void fail(const char* key, const std::string& message) override {
    OCTET_THROW("compression." << key << ": " << message);  // (defaults are never rejected)
  }

 private:
  void note(const char* key, double dflt) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.emplace_back(key), dflts.push_back(dflt);
  }
};

}  // namespace

std::vector<std::string> method_key_names(const std::string& method) {
  KeyNames k;
  CodecParams p;
  if (method == "auto") {
    read_method_keys(k, p);
  } else if (is_low_rank(method)) {
    CodecParams low;
    read_method_keys(k, low);  // (powersgd's keys are the reader's last)
    KeyNames codecs;
    for (const auto& e : codec_registry()) e.read(codecs, p);
    std::vector<std::string> own;
    for (const std::string& key : k.keys)
      if (std::find(codecs.keys.begin(), codecs.keys.end(), key) == codecs.keys.end()) own.push_back(key);
    return own;
  } else {
    for (const auto& e : codec_registry())
      if (method == e.name) e.read(k, p);
  }
  return k.keys;
}

std::vector<std::pair<std::string, double>> method_key_defaults(const CodecParams& inherited) {
  KeyNames k;
  CodecParams p = inherited;
  read_method_keys(k, p);
  std::vector<std::pair<std::string, double>> out;
  for (size_t i = 0; i < k.keys.size(); ++i) out.push_back({k.keys[i], k.dflts[i]});
  return out;
}

std::optional<CodecKeyError> check_method_keys(const CodecParams& p) {
  if (auto bad = check_codec_keys(p, true)) return bad;
  return check_powersgd(p);
}

LowRankShape low_rank_shape(const Shape& s, const PowerSgdParams& p) {
  if (s.size() < 2) return {};
  int64_t cols = 1;
  for (size_t i = 1; i < s.size(); ++i) cols *= s[i];
  const int64_t rows = s[0];
  const int r = static_cast<int>(std::min<int64_t>({p.rank, rows, cols}));
  if (r < 1 || static_cast<double>((rows + cols) * r) * p.min_compression_rate >= static_cast<double>(rows * cols))
    return {};
  return {rows, cols, r};
}

void lowrank_gemm_cpu(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool trans_a,
                      bool trans_b, const Stream&) {
  const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.f, a, trans_a ? m : k, b,
                                      trans_b ? k : n, 0.f, c, n);
  OCTET_CHECK(st == dnnl_success, "powersgd: oneDNN sgemm " << m << " x " << n << " x " << k << " failed (status "
                                                            << static_cast<int>(st) << ")");
}

void orthogonalize_cpu(float* p, int64_t rows, int r, float eps, const Stream&) {
  for (int i = 0; i < r; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < rows; ++j) ss += static_cast<double>(p[j * r + i]) * p[j * r + i];
    const float inv = static_cast<float>(1.0 / (std::sqrt(ss) + eps));
    for (int64_t j = 0; j < rows; ++j) p[j * r + i] *= inv;
    for (int l = i + 1; l < r; ++l) {
      double dot = 0;
      for (int64_t j = 0; j < rows; ++j) dot += static_cast<double>(p[j * r + i]) * p[j * r + l];
      const float d = static_cast<float>(dot);
      for (int64_t j = 0; j < rows; ++j) p[j * r + l] -= d * p[j * r + i];
    }
  }
}

void lowrank_gemm(Exec& ex, const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool trans_a,
                  bool trans_b) {
  launch_twin("powersgd gemm", lowrank_gemm_cpu, OCTET_CUDA_TWIN(lowrank_gemm_cuda), ex.comm(), a, b, c, m, n, k,
              trans_a, trans_b);
}

void orthogonalize(Exec& ex, float* p, int64_t rows, int r, float eps) {
  launch_twin("powersgd orthogonalize", orthogonalize_cpu, OCTET_CUDA_TWIN(orthogonalize_cuda), ex.comm(), p, rows, r,
              eps);
}

}  // namespace octet
