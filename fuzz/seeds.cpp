// Implementation of the fuzz seed helpers.
#include "fuzz/seeds.h"

#include <cstdlib>
#include <fstream>

#include "core/rng.h"

namespace octet::fuzz {

std::string seed_dir() {
  const char* d = std::getenv("OCTET_FUZZ_SEEDS");
  return d ? d : "";
}

void write_seed(const std::string& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  std::ofstream(dir + "/seed-" + name, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<float> normal_values(int64_t n, uint64_t seed) {
  Rng r(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = r.normal();
  return v;
}

}  // namespace octet::fuzz
