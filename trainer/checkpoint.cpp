// Checkpoint encoding: "OCTETCKP", version, position, tensors (name, shape, fp32 data), CRC32 trailer.
#include "trainer/checkpoint.h"

#include <zlib.h>

#include <cstring>

#include "core/error.h"
#include "core/fileio.h"

namespace octet {

namespace {

constexpr char kMagic[8] = {'O', 'C', 'T', 'E', 'T', 'C', 'K', 'P'};

template <typename T> void put(std::string& out, const T& v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }

// Bounds-checked little reader over the checkpoint bytes.
struct Reader {
  const std::string& path;
  const std::string& buf;
  size_t pos = 0;
  size_t end;
  template <typename T> T get(const char* what) {
    OCTET_CHECK(pos + sizeof(T) <= end, path << ": truncated at offset " << pos << " reading " << what);
    T v;
    std::memcpy(&v, buf.data() + pos, sizeof v);
    pos += sizeof v;
    return v;
  }
  const char* bytes(size_t n, const char* what) {
    OCTET_CHECK(n <= end - pos, path << ": truncated at offset " << pos << " reading " << what << " (" << n << " bytes)");
    const char* p = buf.data() + pos;
    pos += n;
    return p;
  }
};

}  // namespace

void save_checkpoint(const std::string& path, const TrainPosition& pos, const NamedTensors& tensors) {
  std::string out;
  out.append(kMagic, sizeof kMagic);
  put(out, kCheckpointVersion);
  put(out, pos.epoch);
  put(out, pos.batch);
  put(out, pos.global_step);
  put(out, pos.seed);
  put(out, static_cast<uint32_t>(tensors.size()));
  for (const auto& [name, t] : tensors) {
    OCTET_CHECK(t->device() == Device::CPU, "checkpoint of device tensor " << name << ": copy to host first");
    put(out, static_cast<uint32_t>(name.size()));
    out += name;
    put(out, static_cast<uint32_t>(t->ndim()));
    for (int64_t d : t->shape()) put(out, d);
    out.append(reinterpret_cast<const char*>(t->data()), t->bytes());
  }
  put(out, static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(out.data()), static_cast<uInt>(out.size()))));
  write_file_atomic(path, out);
}

TrainPosition load_checkpoint(const std::string& path, const NamedTensors& tensors) {
  OCTET_CHECK(path_exists(path), path << ": checkpoint not found");
  const std::string buf = read_file(path);
  OCTET_CHECK(buf.size() >= sizeof kMagic + 8, path << ": too short for a checkpoint (" << buf.size() << " bytes)");
  OCTET_CHECK(std::memcmp(buf.data(), kMagic, sizeof kMagic) == 0, path << ": not an octet checkpoint (bad magic at offset 0)");
  Reader r{path, buf, sizeof kMagic, buf.size() - 4};
  const uint32_t version = r.get<uint32_t>("version");
  OCTET_CHECK(version == kCheckpointVersion, path << ": checkpoint version " << version << " at offset 8, this octet reads version "
                                                  << kCheckpointVersion);
  uint32_t stored_crc;
  std::memcpy(&stored_crc, buf.data() + buf.size() - 4, 4);
  const uint32_t crc = static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(buf.data()), static_cast<uInt>(buf.size() - 4)));
  OCTET_CHECK(crc == stored_crc, path << ": CRC mismatch (file corrupt or truncated; trailer at offset " << buf.size() - 4 << ")");
  TrainPosition pos;
  pos.epoch = r.get<int64_t>("epoch");
  pos.batch = r.get<int64_t>("batch");
  pos.global_step = r.get<int64_t>("global_step");
  pos.seed = r.get<uint64_t>("seed");
  OCTET_CHECK(pos.epoch >= 0 && pos.batch >= 0 && pos.global_step >= 0, path << ": negative training position");
  const uint32_t count = r.get<uint32_t>("tensor count");
  OCTET_CHECK(count == tensors.size(), path << ": holds " << count << " tensors, the model and optimizer have " << tensors.size());
  // Parse everything before touching the destination tensors, so a bad file changes nothing.
  std::vector<const char*> data(count);
  for (uint32_t i = 0; i < count; ++i) {
    const size_t at = r.pos;
    const uint32_t len = r.get<uint32_t>("name length");
    std::string name(r.bytes(len, "name"), len);
    OCTET_CHECK(name == tensors[i].first, path << ": tensor " << i << " at offset " << at << " is '" << name << "', expected '"
                                               << tensors[i].first << "' (different model or optimizer?)");
    const uint32_t ndim = r.get<uint32_t>("ndim");
    OCTET_CHECK(ndim <= 8, path << ": tensor '" << name << "' claims " << ndim << " dimensions");
    Shape shape(ndim);
    for (auto& d : shape) d = r.get<int64_t>("dimension");
    OCTET_CHECK(shape == tensors[i].second->shape(), path << ": tensor '" << name << "' has shape " << shape_str(shape)
                                                          << ", the model has " << shape_str(tensors[i].second->shape()));
    data[i] = r.bytes(tensors[i].second->bytes(), "tensor data");
  }
  OCTET_CHECK(r.pos == r.end, path << ": " << r.end - r.pos << " unexpected bytes at offset " << r.pos);
  for (uint32_t i = 0; i < count; ++i) std::memcpy(tensors[i].second->data(), data[i], tensors[i].second->bytes());
  return pos;
}

}  // namespace octet
