// safetensors files (Hugging Face's format of shared weights), read and written: an 8-byte little-endian header
// length N, N bytes of JSON ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, ..., "__metadata__": {string:
// string}}), then the data buffer the offsets point into, each tensor row-major little-endian. The reader trusts
// nothing past what the file holds: every length, offset, dtype, shape and name is checked, and an error names the
// file and the tensor or byte offset.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace octet {

// The element types octet reads (F32, F16, BF16 and F64 convert to fp32; I64 and I32 only where a reader asks, such
// as torch's batchnorm counters) and writes (F32, I64).
enum class SafeDtype { F32, F16, BF16, F64, I64, I32 };
const char* safe_dtype_name(SafeDtype d);
size_t safe_dtype_bytes(SafeDtype d);

struct SafeTensor {
  std::string name;
  SafeDtype dtype = SafeDtype::F32;
  Shape shape;
  size_t offset = 0;  // of the data in the file
  size_t bytes = 0;
  const uint8_t* data = nullptr;  // into SafeTensorsFile::bytes
};

struct SafeTensorsFile {
  SafeTensorsFile() = default;
  SafeTensorsFile(const SafeTensorsFile&) = delete;  // (a copy's tensors would point into the original's bytes)
  SafeTensorsFile& operator=(const SafeTensorsFile&) = delete;
  SafeTensorsFile(SafeTensorsFile&&) = default;
  SafeTensorsFile& operator=(SafeTensorsFile&&) = default;
  std::string path;
  std::string bytes;                                      // the whole file (the tensors point into it)
  std::map<std::string, std::string> metadata;            // "__metadata__"
  std::vector<SafeTensor> tensors;                        // in the order of their data
  const SafeTensor* find(const std::string& name) const;  // nullptr when absent
};

constexpr uint64_t kSafeTensorsMaxHeader = uint64_t{100} << 20;  // 100 MB of JSON: anything larger is refused

// Parses a file's bytes (path names the file in errors): the header length within the file and under
// kSafeTensorsMaxHeader, JSON that parses with an object per tensor, known dtypes, shapes of non-negative sizes whose
// byte count equals the data range, ranges inside the data buffer that neither overlap nor leave gaps, unique names,
// metadata of strings.
SafeTensorsFile parse_safetensors(const std::string& path, std::string bytes);
SafeTensorsFile read_safetensors(const std::string& path);  // read_file + parse_safetensors
// Whether the bytes start as a safetensors file does: 8 bytes of header length, then its JSON ('{'; or '[' or a space
// where that length fits the file), so that parse_safetensors names a malformed header at its offset. (Tells it from
// an octet checkpoint, which starts "OCTETCKP", and from other files.)
bool looks_like_safetensors(const std::string& bytes);

// A tensor's values as fp32 (F32, F16, BF16, F64); a NaN or infinity, or another dtype, fails naming the tensor and
// the index.
std::vector<float> safe_floats(const SafeTensorsFile& f, const SafeTensor& t);

// One tensor to write: fp32 values (F32), or with is_i64 int64 values (I64: torch's batchnorm counters).
struct SafeTensorOut {
  std::string name;
  Shape shape;
  std::vector<float> f32;
  std::vector<int64_t> i64;
  bool is_i64 = false;
};

// The file's bytes: the header (padded with spaces to a multiple of 8) and the tensors' data, the 8-byte ones first
// (each aligned), each group by name.
std::string encode_safetensors(const std::vector<SafeTensorOut>& tensors,
                               const std::map<std::string, std::string>& metadata);
// Written atomically (core/fileio.h).
void write_safetensors(const std::string& path, const std::vector<SafeTensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace octet
