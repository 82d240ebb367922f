// libFuzzer target: every codec's decoder, at every instruction-set level built in, on hostile payloads held in
// buffers of exactly their size (ASan sees any read past them). Input: [codec][level][n: 2 bytes][accumulate][payload].
#include <cstring>
#include <memory>
#include <vector>

#include "compress/codec.h"
#include "compress/simd.h"
#include "core/error.h"
#include "fuzz/seeds.h"

using namespace octet;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string dir = fuzz::seed_dir();
  if (dir.empty()) return 0;
  const auto& reg = codec_registry();
  for (size_t c = 0; c < reg.size(); ++c)
    for (int64_t n : {1, 100, 5000}) {
      CodecParams p;
      p.method = reg[c].name;
      auto codec = make_codec(p);
      const auto x = fuzz::normal_values(n, static_cast<uint64_t>(n + c));
      std::vector<uint8_t> payload(codec->max_bytes(n));
      payload.resize(codec->encode(x.data(), n, payload.data(), {7, nullptr}));
      std::vector<uint8_t> in = {static_cast<uint8_t>(c), static_cast<uint8_t>(kBuiltIsa),
                                 static_cast<uint8_t>(n & 255), static_cast<uint8_t>(n >> 8), 0};
      in.insert(in.end(), payload.begin(), payload.end());
      fuzz::write_seed(dir, std::string(reg[c].name) + "-" + std::to_string(n), in);
    }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  const auto& reg = codec_registry();
  CodecParams p;
  p.method = reg[data[0] % reg.size()].name;
  set_isa_cap(static_cast<Isa>(data[1] % (static_cast<int>(kBuiltIsa) + 1)));
  const int64_t n = data[2] | int64_t{data[3]} << 8;
  const bool accumulate = data[4] & 1;
  const size_t len = size - 5;
  std::unique_ptr<uint8_t[]> payload(new uint8_t[len]);
  if (len) std::memcpy(payload.get(), data + 5, len);
  std::unique_ptr<float[]> out(new float[static_cast<size_t>(n)]);
  for (int64_t i = 0; i < n; ++i) out[i] = 0.5f;
  try {
    make_codec(p)->decode(payload.get(), len, out.get(), n, accumulate);
  } catch (const Error&) {
  }
  return 0;
}
