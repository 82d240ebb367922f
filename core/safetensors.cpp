// safetensors reading (every length, offset, dtype, shape and name checked; the JSON through nlohmann-json) and
// writing (sorted names, the header padded to 8 bytes, atomic).
#include "core/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/fileio.h"
#include "core/half_math.h"

namespace octet {

namespace {

using json = nlohmann::json;

struct DtypeRow {
  SafeDtype d;
  const char* name;
  size_t bytes;
};
constexpr DtypeRow kDtypes[] = {{SafeDtype::F32, "F32", 4}, {SafeDtype::F16, "F16", 2}, {SafeDtype::BF16, "BF16", 2},
                                {SafeDtype::F64, "F64", 8}, {SafeDtype::I64, "I64", 8}, {SafeDtype::I32, "I32", 4}};

uint64_t read_u64(const std::string& b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | static_cast<uint8_t>(b[static_cast<size_t>(i)]);
  return v;
}

std::string u64_bytes(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(v >> (8 * i) & 0xff);
  return out;
}

// A JSON value as a size (a non-negative integer that fits size_t); what: for the error.
uint64_t as_size(const json& v, const std::string& at) {
  // (a nested value is named by its type: dumping it would recurse once a level, as deep as a hostile file nests)
  OCTET_CHECK(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0),
              at << ": expected a non-negative integer, got " << (v.is_primitive() ? v.dump() : v.type_name()));
  return v.get<uint64_t>();
}

}  // namespace

const char* safe_dtype_name(SafeDtype d) {
  for (const DtypeRow& r : kDtypes)
    if (r.d == d) return r.name;
  return "?";
}

size_t safe_dtype_bytes(SafeDtype d) {
  for (const DtypeRow& r : kDtypes)
    if (r.d == d) return r.bytes;
  return 0;
}

const SafeTensor* SafeTensorsFile::find(const std::string& name) const {
  for (const SafeTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

bool looks_like_safetensors(const std::string& bytes) {
  // The JSON header's first byte after the 8 of its length: an object (then a malformed header, a length past the
  // file or the limit, still gets parse_safetensors' error naming the offset rather than "not a safetensors file"),
  // or, where the length fits the file, a header that is no object.
  if (bytes.size() < 9) return false;
  if (bytes[8] == '{') return true;
  const uint64_t n = read_u64(bytes);
  return (bytes[8] == '[' || bytes[8] == ' ') && n >= 2 && n <= bytes.size() - 8;
}

SafeTensorsFile parse_safetensors(const std::string& path, std::string bytes) {
  SafeTensorsFile f;
  f.path = path;
  f.bytes = std::move(bytes);
  const std::string& b = f.bytes;
  OCTET_CHECK(b.size() >= 8, path << ": not a safetensors file: " << b.size() << " bytes, fewer than the 8 of its "
                                  << "header length");
  const uint64_t n = read_u64(b);
  OCTET_CHECK(n <= kSafeTensorsMaxHeader,
              path << ": offset 0: header length " << n << " bytes is past the limit of " << kSafeTensorsMaxHeader);
  OCTET_CHECK(n <= b.size() - 8,
              path << ": offset 0: header length " << n << " runs past the end of the file (" << b.size() << " bytes)");
  // Names must be unique, at the top level and inside each tensor's object (and the metadata): the parser's callback
  // sees each key before an object keeps one of two.
  std::set<std::string> seen, inner;
  std::string duplicate;
  const json::parser_callback_t unique = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::object_start && depth == 1) inner.clear();
    if (ev == json::parse_event_t::key && duplicate.empty()) {
      const std::string k = parsed.get<std::string>();
      if (depth == 1 && !seen.insert(k).second) duplicate = "tensor '" + k + "' is named twice in the header";
      if (depth == 2 && !inner.insert(k).second) duplicate = "key '" + k + "' appears twice in one entry";
    }
    return true;
  };
  json header;
  try {
    header = json::parse(b.begin() + 8, b.begin() + 8 + static_cast<std::ptrdiff_t>(n), unique);
  } catch (const json::parse_error& e) {
    OCTET_THROW(path << ": offset " << 8 + e.byte - (e.byte > 0 ? 1 : 0) << ": the JSON header does not parse ("
                     << e.what() << ")");
  } catch (const json::exception& e) {  // (a number past every type's range, ...)
    OCTET_THROW(path << ": offset 8: the JSON header does not parse (" << e.what() << ")");
  }
  OCTET_CHECK(duplicate.empty(), path << ": " << duplicate);
  OCTET_CHECK(header.is_object(), path << ": offset 8: the header is not a JSON object");
  const size_t data_start = 8 + n, data_bytes = b.size() - data_start;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      OCTET_CHECK(v.is_object(), path << ": __metadata__ is not an object of strings");
      for (const auto& [k, m] : v.items()) {
        OCTET_CHECK(m.is_string(), path << ": __metadata__." << k << " is not a string");
        f.metadata[k] = m.get<std::string>();
      }
      continue;
    }
    const std::string at = path + ": tensor '" + name + "'";
    OCTET_CHECK(v.is_object(), at << ": expected an object {dtype, shape, data_offsets}");
    for (const auto& [k, unused] : v.items())
      OCTET_CHECK(k == "dtype" || k == "shape" || k == "data_offsets", at << ": unknown key '" << k << "'");
    OCTET_CHECK(v.contains("dtype") && v["dtype"].is_string(), at << ": dtype missing or not a string");
    SafeTensor t;
    t.name = name;
    const std::string dt = v["dtype"].get<std::string>();
    const DtypeRow* row = nullptr;
    for (const DtypeRow& r : kDtypes)
      if (dt == r.name) row = &r;
    OCTET_CHECK(row, at << ": dtype " << dt << " is not one octet reads (F32, F16, BF16, F64, I64, I32)");
    t.dtype = row->d;
    OCTET_CHECK(v.contains("shape") && v["shape"].is_array() && v["shape"].size() <= 8,
                at << ": shape missing, not an array, or more than 8 dimensions");
    // The element count, with every product checked against overflow.
    uint64_t count = 1;
    for (const json& d : v["shape"]) {
      const uint64_t s = as_size(d, at + ": shape");
      // Every prefix's product fits int64, as Shape's element count is computed.
      constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      OCTET_CHECK(s <= kMax && (s == 0 || count <= kMax / s), at << ": shape overflows");
      count *= s;
      t.shape.push_back(static_cast<int64_t>(s));
    }
    OCTET_CHECK(v.contains("data_offsets") && v["data_offsets"].is_array() && v["data_offsets"].size() == 2,
                at << ": data_offsets missing or not [begin, end]");
    const uint64_t begin = as_size(v["data_offsets"][0], at + ": data_offsets"),
                   end = as_size(v["data_offsets"][1], at + ": data_offsets");
    OCTET_CHECK(begin <= end && end <= data_bytes, at << ": data_offsets [" << begin << ", " << end
                                                      << "] run out of the data buffer (" << data_bytes << " bytes)");
    OCTET_CHECK(count <= std::numeric_limits<uint64_t>::max() / row->bytes && count * row->bytes == end - begin,
                at << ": shape holds " << count << " values of " << row->bytes << " bytes, data_offsets " << end - begin
                   << " bytes");
    t.offset = data_start + begin;
    t.bytes = end - begin;
    t.data = reinterpret_cast<const uint8_t*>(b.data()) + t.offset;
    f.tensors.push_back(std::move(t));
  }
  // The ranges tile the buffer: no overlap, no gap, nothing after the last (as the reference writer leaves them).
  std::sort(f.tensors.begin(), f.tensors.end(), [](const SafeTensor& a, const SafeTensor& c) {
    return a.offset != c.offset ? a.offset < c.offset : a.bytes < c.bytes;
  });
  size_t at = data_start;
  for (const SafeTensor& t : f.tensors) {
    OCTET_CHECK(t.offset >= at, path << ": tensor '" << t.name << "' at offset " << t.offset
                                     << " overlaps the tensor before it (which ends at " << at << ")");
    OCTET_CHECK(t.offset == at, path << ": offset " << at << ": " << t.offset - at << " bytes before tensor '" << t.name
                                     << "' belong to no tensor");
    at = t.offset + t.bytes;
  }
  OCTET_CHECK(at == b.size(), path << ": offset " << at << ": " << b.size() - at << " bytes after the last tensor "
                                   << "belong to no tensor");
  return f;
}

SafeTensorsFile read_safetensors(const std::string& path) { return parse_safetensors(path, read_file(path)); }

std::vector<float> safe_floats(const SafeTensorsFile& f, const SafeTensor& t) {
  const size_t count = t.bytes / std::max<size_t>(1, safe_dtype_bytes(t.dtype));
  std::vector<float> out(count);
  const uint8_t* p = t.data;
  for (size_t i = 0; i < count; ++i) {
    float v;
    switch (t.dtype) {
      case SafeDtype::F32:
        std::memcpy(&v, p + 4 * i, 4);
        break;
      case SafeDtype::F16: {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        v = half_to_float(h);
        break;
      }
      case SafeDtype::BF16: {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        v = f32_from_bits(static_cast<uint32_t>(h) << 16);
        break;
      }
      case SafeDtype::F64: {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        v = static_cast<float>(d);
        OCTET_CHECK(std::isfinite(v) || !std::isfinite(d),
                    f.path << ": tensor '" << t.name << "' value " << i << " (" << d << ") is past fp32's range");
        break;
      }
      default:
        OCTET_THROW(f.path << ": tensor '" << t.name << "' is " << safe_dtype_name(t.dtype)
                           << ", not a floating-point tensor");
    }
    OCTET_CHECK(std::isfinite(v), f.path << ": tensor '" << t.name << "' holds " << v << " at index " << i
                                         << " (offset " << t.offset + i * safe_dtype_bytes(t.dtype) << ")");
    out[i] = v;
  }
  return out;
}

std::string encode_safetensors(const std::vector<SafeTensorOut>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  std::vector<const SafeTensorOut*> order;
  for (const SafeTensorOut& t : tensors) order.push_back(&t);
  // 8-byte elements first, so that every tensor starts aligned to its element (the data buffer starts at a multiple of
  // 8), then by name, as the reference writer orders them.
  std::sort(order.begin(), order.end(), [](const SafeTensorOut* a, const SafeTensorOut* b) {
    return a->is_i64 != b->is_i64 ? a->is_i64 : a->name < b->name;
  });
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string data;
  std::set<std::string> names;
  for (const SafeTensorOut* t : order) {
    OCTET_CHECK(names.insert(t->name).second, "safetensors: tensor '" << t->name << "' written twice");
    OCTET_CHECK(t->name != "__metadata__", "safetensors: a tensor may not be named __metadata__");
    const size_t count = static_cast<size_t>(shape_numel(t->shape));
    const size_t have = t->is_i64 ? t->i64.size() : t->f32.size();
    OCTET_CHECK(have == count,
                "safetensors: tensor '" << t->name << "' has " << have << " values for shape " << shape_str(t->shape));
    const size_t begin = data.size();
    if (t->is_i64)
      for (int64_t v : t->i64) data += u64_bytes(static_cast<uint64_t>(v));
    else
      data.append(reinterpret_cast<const char*>(t->f32.data()), 4 * count);
    header[t->name] = {
        {"dtype", t->is_i64 ? "I64" : "F32"}, {"shape", t->shape}, {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return u64_bytes(text.size()) + text + data;
}

void write_safetensors(const std::string& path, const std::vector<SafeTensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, encode_safetensors(tensors, metadata));
}

}  // namespace octet
