// Seed inputs for the fuzz targets: each target writes valid examples of its input format into the folder named by
// OCTET_FUZZ_SEEDS (from LLVMFuzzerInitialize), so that fuzzing starts from real payloads instead of random bytes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace octet::fuzz {

// The folder to write seeds to, or "" when OCTET_FUZZ_SEEDS is unset.
std::string seed_dir();
void write_seed(const std::string& dir, const std::string& name, const std::vector<uint8_t>& bytes);
std::vector<float> normal_values(int64_t n, uint64_t seed);

}  // namespace octet::fuzz
