// Implementation of the checkpoint byte layout (see checkpoint_format.h).
#include "trainer/checkpoint_format.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace octet {

namespace {

constexpr char kMagic[8] = {'O', 'C', 'T', 'E', 'T', 'C', 'K', 'P'};

template <typename T>
void put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void put_tensors(std::string& out, const NamedTensors& tensors) {
  for (const auto& [name, t] : tensors) {
    OCTET_CHECK(t->device() == Device::CPU, "checkpoint of device tensor " << name << ": copy to host first");
    put(out, static_cast<uint32_t>(name.size()));
    out += name;
    put(out, static_cast<uint32_t>(t->ndim()));
    for (int64_t d : t->shape()) put(out, d);
    out.append(reinterpret_cast<const char*>(t->data()), t->bytes());
  }
}

// Bounds-checked reader over bytes that sit at offset `base` of the file (error offsets are file offsets).
struct Reader {
  const std::string& path;
  const char* buf;
  size_t pos, end, base;
  size_t at() const { return base + pos; }
  template <typename T>
  T get(const char* what) {
    OCTET_CHECK(pos + sizeof(T) <= end, path << ": truncated at offset " << at() << " reading " << what);
    T v;
    std::memcpy(&v, buf + pos, sizeof v);
    pos += sizeof v;
    return v;
  }
  const char* bytes(size_t n, const char* what) {
    OCTET_CHECK(n <= end - pos,
                path << ": truncated at offset " << at() << " reading " << what << " (" << n << " bytes)");
    const char* p = buf + pos;
    pos += n;
    return p;
  }
};

std::vector<CheckpointEntry> read_entries(Reader& r, uint32_t count) {
  std::vector<CheckpointEntry> out;
  for (uint32_t i = 0; i < count; ++i) {
    CheckpointEntry e;
    e.offset = r.at();
    const uint32_t len = r.get<uint32_t>("name length");
    e.name.assign(r.bytes(len, "name"), len);
    const uint32_t ndim = r.get<uint32_t>("ndim");
    OCTET_CHECK(ndim <= 8,
                r.path << ": tensor '" << e.name << "' at offset " << e.offset << " claims " << ndim << " dimensions");
    e.shape.resize(ndim);
    uint64_t numel = 1;
    for (auto& d : e.shape) {
      d = r.get<int64_t>("dimension");
      OCTET_CHECK(d >= 0 && d <= (int64_t{1} << 40),
                  r.path << ": tensor '" << e.name << "' at offset " << e.offset << " has dimension " << d);
      numel *= static_cast<uint64_t>(d);
      OCTET_CHECK(numel <= (uint64_t{1} << 40),
                  r.path << ": tensor '" << e.name << "' at offset " << e.offset << " is too large");
    }
    e.data = r.bytes(4 * numel, "tensor data");
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

std::string checkpoint_head(const TrainPosition& pos, int ranks, const NamedTensors& shared, bool sections) {
  std::string head;
  head.append(kMagic, sizeof kMagic);
  put(head, kCheckpointVersion);
  put(head, pos.epoch);
  put(head, pos.batch);
  put(head, pos.global_step);
  put(head, pos.seed);
  put(head, static_cast<uint32_t>(ranks));
  put(head, static_cast<uint32_t>(shared.size()));
  put_tensors(head, shared);
  put(head, static_cast<uint32_t>(sections ? ranks : 0));
  return head;
}

std::string checkpoint_section(int rank, const NamedTensors& tensors) {
  std::string out;
  put(out, static_cast<uint32_t>(rank));
  put(out, static_cast<uint32_t>(tensors.size()));
  put_tensors(out, tensors);
  return out;
}

uint32_t checkpoint_crc(uint32_t crc, const std::string& bytes) {
  constexpr size_t kPiece = size_t{1} << 30;  // zlib's length is a uInt
  for (size_t off = 0; off < bytes.size(); off += kPiece)
    crc = static_cast<uint32_t>(crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + off),
                                      static_cast<uInt>(std::min(kPiece, bytes.size() - off))));
  return crc;
}

std::string encode_checkpoint(const TrainPosition& pos, const NamedTensors& shared, const NamedTensors& per_rank) {
  std::string out = checkpoint_head(pos, 1, shared, !per_rank.empty());
  if (!per_rank.empty()) out += checkpoint_section(0, per_rank);
  const uint32_t crc = checkpoint_crc(0, out);
  put(out, crc);
  return out;
}

CheckpointFile parse_checkpoint(const std::string& path, const std::string& buf) {
  OCTET_CHECK(buf.size() >= sizeof kMagic + 8, path << ": too short for a checkpoint (" << buf.size() << " bytes)");
  OCTET_CHECK(std::memcmp(buf.data(), kMagic, sizeof kMagic) == 0,
              path << ": not an octet checkpoint (bad magic at offset 0)");
  Reader r{path, buf.data(), sizeof kMagic, buf.size() - 4, 0};
  CheckpointFile f;
  f.version = r.get<uint32_t>("version");
  OCTET_CHECK(f.version == 1 || f.version == kCheckpointVersion,
              path << ": checkpoint version " << f.version << " at offset 8, this octet reads versions 1 and "
                   << kCheckpointVersion);
  uint32_t stored_crc;
  std::memcpy(&stored_crc, buf.data() + buf.size() - 4, 4);
  const uint32_t crc = checkpoint_crc(0, std::string(buf.data(), buf.size() - 4));
  OCTET_CHECK(crc == stored_crc,
              path << ": CRC mismatch (file corrupt or truncated; trailer at offset " << buf.size() - 4 << ")");
  f.pos.epoch = r.get<int64_t>("epoch");
  f.pos.batch = r.get<int64_t>("batch");
  f.pos.global_step = r.get<int64_t>("global_step");
  f.pos.seed = r.get<uint64_t>("seed");
  OCTET_CHECK(f.pos.epoch >= 0 && f.pos.batch >= 0 && f.pos.global_step >= 0,
              path << ": negative training position at offset 12");
  if (f.version >= 2) {
    f.ranks = r.get<uint32_t>("rank count");
    OCTET_CHECK(f.ranks >= 1 && f.ranks <= (1u << 24),
                path << ": rank count " << f.ranks << " at offset " << r.at() - 4);
  }
  f.shared = read_entries(r, r.get<uint32_t>("tensor count"));
  if (f.version >= 2) {
    const size_t at = r.at();
    const uint32_t sections = r.get<uint32_t>("section count");
    OCTET_CHECK(sections == 0 || sections == f.ranks,
                path << ": " << sections << " per-rank sections at offset " << at << " for " << f.ranks << " ranks");
    for (uint32_t s = 0; s < sections; ++s) {
      CheckpointSection sec;
      sec.offset = r.at();
      sec.rank = r.get<uint32_t>("section rank");
      OCTET_CHECK(sec.rank == s,
                  path << ": section " << s << " at offset " << sec.offset << " belongs to rank " << sec.rank);
      sec.entries = read_entries(r, r.get<uint32_t>("section tensor count"));
      sec.end = r.at();
      f.sections.push_back(std::move(sec));
    }
  }
  OCTET_CHECK(r.pos == r.end, path << ": " << r.end - r.pos << " unexpected bytes at offset " << r.pos);
  return f;
}

std::vector<CheckpointEntry> parse_section(const std::string& path, const std::string& bytes, size_t base, int rank) {
  Reader r{path, bytes.data(), 0, bytes.size(), base};
  const uint32_t who = r.get<uint32_t>("section rank");
  OCTET_CHECK(static_cast<int>(who) == rank,
              path << ": section at offset " << base << " belongs to rank " << who << ", not " << rank);
  std::vector<CheckpointEntry> entries = read_entries(r, r.get<uint32_t>("section tensor count"));
  OCTET_CHECK(r.pos == r.end, path << ": " << r.end - r.pos << " unexpected bytes at offset " << r.at() << " of rank "
                                   << rank << "'s section");
  return entries;
}

void check_match(const std::string& path, const std::vector<CheckpointEntry>& entries, const NamedTensors& tensors,
                 const std::string& what) {
  OCTET_CHECK(entries.size() == tensors.size(), path << ": holds " << entries.size() << " tensors of " << what
                                                     << ", the model, optimizer "
                                                     << "and compression of this run have " << tensors.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const CheckpointEntry& e = entries[i];
    OCTET_CHECK(e.name == tensors[i].first, path << ": tensor " << i << " of " << what << " at offset " << e.offset
                                                 << " is '" << e.name << "', expected '" << tensors[i].first
                                                 << "' (different model or optimizer?)");
    OCTET_CHECK(e.shape == tensors[i].second->shape(), path << ": tensor '" << e.name << "' at offset " << e.offset
                                                            << " has shape " << shape_str(e.shape) << ", the model has "
                                                            << shape_str(tensors[i].second->shape()));
  }
}

void copy_into(const std::vector<CheckpointEntry>& entries, const NamedTensors& tensors) {
  for (size_t i = 0; i < entries.size(); ++i)
    if (tensors[i].second->bytes() > 0)
      std::memcpy(tensors[i].second->data(), entries[i].data, tensors[i].second->bytes());
}

}  // namespace octet
