// MNIST IDX reader (raw or .gz through zlib): validates magic, dimensions, counts, labels and exact file length.
#include <sys/stat.h>
#include <zlib.h>

#include "core/error.h"
#include "data/dataset.h"

namespace octet {

namespace {

uint32_t be32(const std::vector<uint8_t>& b, size_t off) {
  return (uint32_t{b[off]} << 24) | (uint32_t{b[off + 1]} << 16) | (uint32_t{b[off + 2]} << 8) | uint32_t{b[off + 3]};
}

// Parses an IDX header of the expected rank; returns the dimensions and checks the payload length exactly.
std::vector<uint32_t> parse_header(const std::string& path, const std::vector<uint8_t>& b, uint32_t rank) {
  OCTET_CHECK(b.size() >= 4 + 4 * rank, path << ": file too short for an IDX header (" << b.size() << " bytes)");
  const uint32_t magic = be32(b, 0);
  const uint32_t expected = 0x0800u | rank;  // type 0x08 = unsigned byte
  OCTET_CHECK(magic == expected,
              path << ": bad magic 0x" << std::hex << magic << " at offset 0, expected 0x" << expected);
  std::vector<uint32_t> dims(rank);
  uint64_t payload = 1;
  for (uint32_t i = 0; i < rank; ++i) {
    dims[i] = be32(b, 4 + 4 * i);
    OCTET_CHECK(dims[i] > 0, path << ": dimension " << i << " is zero (offset " << 4 + 4 * i << ")");
    payload *= dims[i];
    OCTET_CHECK(payload <= (uint64_t{1} << 40),
                path << ": dimensions up to offset " << 4 + 4 * i << " describe more than 2^40 bytes");
  }
  const uint64_t want = 4 + 4 * rank + payload;
  OCTET_CHECK(b.size() >= want, path << ": truncated: header promises " << want << " bytes, file has " << b.size()
                                     << " (data ends at offset " << b.size() << ")");
  OCTET_CHECK(b.size() == want, path << ": " << b.size() - want << " trailing bytes after offset " << want);
  return dims;
}

}  // namespace

std::unique_ptr<U8ImageDataset> parse_idx(const std::string& images_path, std::vector<uint8_t> img,
                                          const std::string& labels_path, const std::vector<uint8_t>& lab,
                                          Normalize norm) {
  std::vector<uint32_t> idim = parse_header(images_path, img, 3);
  std::vector<uint32_t> ldim = parse_header(labels_path, lab, 1);
  OCTET_CHECK(idim[0] == ldim[0], images_path << " holds " << idim[0] << " images but " << labels_path << " holds "
                                              << ldim[0] << " labels");
  const size_t n = ldim[0];
  std::vector<int32_t> labels(n);
  for (size_t i = 0; i < n; ++i) {
    labels[i] = lab[8 + i];
    OCTET_CHECK(labels[i] <= 9,
                labels_path << ": label " << labels[i] << " at offset " << 8 + i << " is not a digit class 0-9");
  }
  img.erase(img.begin(), img.begin() + 16);
  img.shrink_to_fit();
  Shape shape = {1, static_cast<int64_t>(idim[1]), static_cast<int64_t>(idim[2])};
  return std::make_unique<U8ImageDataset>(images_path, shape, std::move(img), std::move(labels), 10, norm);
}

namespace {
// What an IDX file may inflate to: what its header promises (a header that promises nothing sane: what the header
// check allows, which then names the fault).
SizeLimit idx_limit(const std::vector<uint8_t>& head, uint32_t rank) {
  SizeLimit l{uint64_t{1} << 41, "an IDX file's header allows"};
  if (head.size() < 4 + 4 * rank) return l;
  uint64_t payload = 1;
  bool sane = true;
  for (uint32_t i = 0; i < rank && sane; ++i)
    sane = be32(head, 4 + 4 * i) > 0 &&  // (a zero dimension is the header check's to name)
           !__builtin_mul_overflow(payload, uint64_t{be32(head, 4 + 4 * i)}, &payload) &&
           payload <= (uint64_t{1} << 40);
  if (sane) l.bytes = 4 + 4 * rank + payload + (1 << 16), l.what = "its IDX header promises";
  return l;
}
}  // namespace

std::unique_ptr<U8ImageDataset> load_idx(const std::string& images_path, const std::string& labels_path,
                                         Normalize norm) {
  std::vector<uint8_t> img = read_file_gz(images_path, [](const std::vector<uint8_t>& h) { return idx_limit(h, 3); });
  parse_header(images_path, img, 3);  // the images' errors before the labels file is read
  return parse_idx(images_path, std::move(img), labels_path,
                   read_file_gz(labels_path, [](const std::vector<uint8_t>& h) { return idx_limit(h, 1); }), norm);
}

std::unique_ptr<U8ImageDataset> load_mnist_dir(const std::string& dir, const std::string& prefix, Normalize norm) {
  auto pick = [&](const std::string& stem) {
    const std::string base = dir + "/" + prefix + "-" + stem;
    struct stat st {};
    if (::stat((base + ".gz").c_str(), &st) == 0) return base + ".gz";
    if (::stat(base.c_str(), &st) == 0) return base;
    OCTET_THROW(dir << ": neither " << prefix << "-" << stem << ".gz nor " << prefix << "-" << stem << " exists");
  };
  const std::string images = pick("images-idx3-ubyte");
  const std::string labels = pick("labels-idx1-ubyte");
  return load_idx(images, labels, norm);
}

}  // namespace octet
