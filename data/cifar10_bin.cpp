// CIFAR-10 binary batch reader: five training files and one test file of 10,000 records each (or fewer whole records:
// a subset), every length and label checked, the planes kept as they are (they already are CHW).
#include <sys/stat.h>

#include "core/error.h"
#include "data/dataset.h"

namespace octet {

void parse_cifar10_batch(const std::string& name, const std::vector<uint8_t>& b, std::vector<uint8_t>& pixels,
                         std::vector<int32_t>& labels) {
  const uint64_t most = static_cast<uint64_t>(kCifarRecord * kCifarRecordsPerFile);
  OCTET_CHECK(!b.empty(), name << ": empty (a CIFAR-10 batch holds " << kCifarRecordsPerFile << " records of "
                               << kCifarRecord << " bytes)");
  OCTET_CHECK(b.size() <= most, name << ": " << b.size() << " bytes, more than a CIFAR-10 batch's "
                                     << kCifarRecordsPerFile << " records of " << kCifarRecord << " bytes (" << most
                                     << "): trailing bytes from offset " << most);
  const int64_t records = static_cast<int64_t>(b.size()) / kCifarRecord;
  OCTET_CHECK(b.size() % kCifarRecord == 0,
              name << ": " << b.size() << " bytes are " << records << " whole records of " << kCifarRecord
                   << " bytes and " << b.size() % kCifarRecord << " more: the file is cut inside record " << records
                   << " (at offset " << b.size() << "; a CIFAR-10 batch holds " << kCifarRecordsPerFile << ")");
  pixels.reserve(pixels.size() + static_cast<size_t>(records * (kCifarRecord - 1)));
  for (int64_t r = 0; r < records; ++r) {
    const size_t off = static_cast<size_t>(r * kCifarRecord);
    OCTET_CHECK(b[off] <= 9, name << ": label " << int{b[off]} << " at offset " << off << " (record " << r
                                  << ") is not a class 0-9");
    labels.push_back(b[off]);
    pixels.insert(pixels.end(), b.begin() + static_cast<std::ptrdiff_t>(off + 1),
                  b.begin() + static_cast<std::ptrdiff_t>(off + kCifarRecord));
  }
}

std::unique_ptr<U8ImageDataset> load_cifar10_dir(const std::string& dir, bool train, Normalize norm) {
  std::vector<std::string> stems;
  if (train) {
    for (int i = 1; i <= 5; ++i) stems.push_back("data_batch_" + std::to_string(i) + ".bin");
  } else {
    stems.push_back("test_batch.bin");
  }
  std::vector<uint8_t> pixels;
  std::vector<int32_t> labels;
  for (const std::string& stem : stems) {
    std::string path = dir + "/" + stem;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
      OCTET_CHECK(::lstat((path + ".gz").c_str(), &st) == 0,
                  dir << ": neither " << stem << " nor " << stem << ".gz exists (CIFAR-10 binary version expected)");
      path += ".gz";
    }
    const SizeLimit batch{static_cast<uint64_t>(kCifarRecord * kCifarRecordsPerFile) + (1 << 16), "a CIFAR-10 batch"};
    parse_cifar10_batch(path, read_file_gz(path, [&](const std::vector<uint8_t>&) { return batch; }), pixels, labels);
  }
  return std::make_unique<U8ImageDataset>(dir + "/" + stems[0] + (train ? " .. data_batch_5.bin" : ""),
                                          Shape{3, 32, 32}, std::move(pixels), std::move(labels), 10, norm);
}

}  // namespace octet
