// The one table of codec cases (a codec with its parameters and what its tests expect of it) that drives the codec
// tests: round trips, error feedback and hostile payloads (test_codecs.cpp), the device parity tests (test_device.cpp,
// on a GPU and on the simulated device) and the collectives (test_mpi_collectives.cpp). Every registered codec has at
// least one row (a test fails otherwise); the other rows are the parameter corners that change the kernels' indexing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "compress/codec.h"

namespace octet::test {

constexpr int64_t kCaseValues = 65536;  // values of the round trips the expectations below describe

struct CodecCase {
  std::string name = {};  // the method and the keys that differ from CodecParams' defaults (filled in by codec_cases())
  CodecParams params;
  // A round trip of kCaseValues N(0,1) values:
  int64_t bytes = -1;         // the payload's exact size (-1: it depends on the values, as a sparse codec's does)
  double max_error = 0;       // bound on the mean relative error (mean_relative_error); 0: decoded exactly
  bool recode_exact = false;  // deterministic: one input gives one payload, and decoded values re-encode to themselves
  bool constant_blocks_exact = false;  // 4096-value runs of one value (3, then -7) survive exactly
  // Collectives on N(0,1) values: bound on the mean |result - true mean| (0: none checked).
  double collective_error = 0;
  // Payload offsets of values (or scales) a decoder must refuse when not finite, their width in bytes, and a NaN and
  // an infinity as the payload stores them there (the low finite_bytes bytes, little-endian).
  std::vector<size_t> finite_at = {kHeaderBytes};
  int finite_bytes = 4;
  std::vector<uint32_t> nonfinite = {0x7fc00000u, 0x7f800000u};  // fp32: NaN, infinity
};

const std::vector<CodecCase>& codec_cases();

// n values of a distribution, seeded: "normal" N(0,1), "uniform" in [-1, 1), else heavy-tailed and gradient-like.
std::vector<float> sample(const std::string& dist, int64_t n, uint64_t seed);

}  // namespace octet::test
