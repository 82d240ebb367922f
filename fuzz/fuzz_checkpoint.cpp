// libFuzzer target: the checkpoint reader (structure, CRC, every length and offset), and for files that parse, the
// match against a model's tensors and each per-rank section parsed on its own as a receiving rank does.
#include <cstring>

#include "core/error.h"
#include "fuzz/seeds.h"
#include "trainer/checkpoint_format.h"

using namespace octet;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string dir = fuzz::seed_dir();
  if (dir.empty()) return 0;
  Tensor a({3, 4}), b({5}), r({7});
  for (int64_t i = 0; i < 12; ++i) a.data()[i] = static_cast<float>(i);
  const std::string plain = encode_checkpoint({1, 2, 3, 4}, {{"a", &a}, {"b", &b}}, {});
  const std::string with_state = encode_checkpoint({0, 5, 5, 9}, {{"a", &a}, {"b", &b}}, {{"a.residual", &r}});
  fuzz::write_seed(dir, "plain", std::vector<uint8_t>(plain.begin(), plain.end()));
  fuzz::write_seed(dir, "per-rank", std::vector<uint8_t>(with_state.begin(), with_state.end()));
  return 0;
}

namespace {

void run(const std::string& bytes) {
  try {
    const CheckpointFile f = parse_checkpoint("fuzz", bytes);
    Tensor a({3, 4}), b({5}), r({7});
    const NamedTensors shared = {{"a", &a}, {"b", &b}};
    check_match("fuzz", f.shared, shared, "shared");
    copy_into(f.shared, shared);
    for (const auto& s : f.sections) {
      const std::string section = bytes.substr(s.offset, s.end - s.offset);  // the entries point into it
      const auto entries = parse_section("fuzz", section, s.offset, static_cast<int>(s.rank));
      check_match("fuzz", entries, {{"a.residual", &r}}, "per-rank");
      copy_into(entries, {{"a.residual", &r}});
    }
  } catch (const Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  run(bytes);
  // Mutations almost never keep the CRC right: the same bytes with their trailer recomputed reach the parser behind it.
  if (bytes.size() >= 16) {
    const uint32_t crc = checkpoint_crc(0, bytes.substr(0, bytes.size() - 4));
    std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
    run(bytes);
  }
  return 0;
}
