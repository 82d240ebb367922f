// libFuzzer target: the safetensors reader (header length, JSON, dtypes, shapes, offsets, names), and for files that
// parse, every floating-point tensor's conversion to fp32 (which refuses NaN and infinity).
#include "core/error.h"
#include "core/safetensors.h"
#include "fuzz/seeds.h"

using namespace octet;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string dir = fuzz::seed_dir();
  if (dir.empty()) return 0;
  const std::vector<float> w = fuzz::normal_values(12, 1);
  const std::string two = encode_safetensors(
      {{"conv.weight", {3, 4}, w, {}, false}, {"bn.num_batches_tracked", {}, {}, {7}, true}}, {{"step", "7"}});
  const std::string empty = encode_safetensors({}, {});
  fuzz::write_seed(dir, "two", std::vector<uint8_t>(two.begin(), two.end()));
  fuzz::write_seed(dir, "empty", std::vector<uint8_t>(empty.begin(), empty.end()));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const SafeTensorsFile f = parse_safetensors("fuzz", std::string(reinterpret_cast<const char*>(data), size));
    for (const SafeTensor& t : f.tensors)
      if (t.dtype != SafeDtype::I64 && t.dtype != SafeDtype::I32) safe_floats(f, t);
  } catch (const Error&) {
  }
  return 0;
}
