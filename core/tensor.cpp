// Tensor storage management: aligned host allocation, device allocation through core/device.h, views, copies.
#include "core/tensor.h"

#include <cstdlib>
#include <cstring>

#include "core/device.h"
#include "core/error.h"
#include "core/exec.h"

namespace octet {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    OCTET_CHECK(d >= 0, "negative dimension in shape " << shape_str(s));
    n *= d;
  }
  return n;
}

const char* dtype_name(DType t) { return t == DType::F32 ? "fp32" : t == DType::Bf16 ? "bf16" : "fp16"; }

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(s[i]);
  }
  out += ']';
  return out;
}

namespace {

void host_free(float* p) { std::free(p); }
void pinned_free_floats(float* p) { pinned_free(p); }
void cuda_free_floats(float* p) { device_free(Device::CUDA, p); }  // (through the accounting, as the sim's)
void sim_free_floats(float* p) { device_free(Device::Sim, p); }

}  // namespace

void Tensor::allocate(int64_t n) {
  view_ = false;
  if (n == 0) {
    data_ = {nullptr, [](float*) {}};
    capacity_ = 0;
    return;
  }
  const size_t bytes = static_cast<size_t>(n) * dtype_size(dtype_);
  if (device_ == Device::CPU && pinned_) {
    float* p = static_cast<float*>(pinned_alloc(bytes));
    std::memset(p, 0, bytes);
    data_ = {p, pinned_free_floats};
  } else if (device_ == Device::CPU) {
    float* p = static_cast<float*>(device_alloc(Device::CPU, bytes));
    std::memset(p, 0, (bytes + 63) / 64 * 64);
    data_ = {p, host_free};
  } else {
    float* p = static_cast<float*>(device_alloc(device_, bytes));
    zero_sync(device_, p, bytes);
    data_ = {p, device_ == Device::CUDA ? cuda_free_floats : sim_free_floats};
  }
  capacity_ = static_cast<int64_t>(bytes);
}

void Tensor::throw_dtype(const char* accessor) const {
  OCTET_CHECK(false, "Tensor::" << accessor << " of a " << dtype_name(dtype_) << " tensor " << shape_str(shape_));
  std::abort();  // (unreached)
}

Tensor::Tensor(Shape shape, Device device, DType dtype) : shape_(std::move(shape)), device_(device), dtype_(dtype) {
  numel_ = shape_numel(shape_);
  allocate(numel_);
}

Tensor::Tensor(const Tensor& other)
    : shape_(other.shape_), numel_(other.numel_), device_(other.device_), dtype_(other.dtype_) {
  allocate(numel_);
  copy_from(other);
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this == &other) return *this;
  OCTET_CHECK(!view_ || (other.numel_ == numel_ && other.device_ == device_ && other.dtype_ == dtype_),
              "assignment of " << shape_str(other.shape_) << " into a view of " << shape_str(shape_));
  dtype_ = other.dtype_;
  if (!view_ && (device_ != other.device_ || capacity_ < static_cast<int64_t>(other.bytes()))) {
    device_ = other.device_;
    allocate(other.numel_);
  }
  shape_ = other.shape_;
  numel_ = other.numel_;
  copy_from(other);
  return *this;
}

Tensor& Tensor::operator=(Tensor&& other) {
  if (this == &other) return *this;
  if (view_) return *this = static_cast<const Tensor&>(other);
  shape_ = std::move(other.shape_);
  numel_ = other.numel_, capacity_ = other.capacity_, device_ = other.device_, dtype_ = other.dtype_,
  view_ = other.view_, pinned_ = other.pinned_;
  data_ = std::move(other.data_);
  other.numel_ = other.capacity_ = 0;
  other.shape_.clear();
  return *this;
}

Tensor Tensor::pinned(Shape shape) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  t.pinned_ = true;
  t.allocate(t.numel_);
  return t;
}

Tensor Tensor::wrap(float* data, Shape shape, Device device) {
  return wrap(data, std::move(shape), device, DType::F32);
}

Tensor Tensor::wrap(void* data, Shape shape, Device device, DType dtype) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  t.capacity_ = t.numel_ * static_cast<int64_t>(dtype_size(dtype));
  t.device_ = device;
  t.dtype_ = dtype;
  t.view_ = true;
  t.data_ = {static_cast<float*>(data), [](float*) {}};
  return t;
}

Tensor Tensor::view(int64_t offset, Shape shape) const {
  const int64_t n = shape_numel(shape);
  OCTET_CHECK(offset >= 0 && offset + n <= numel_,
              "view of " << shape_str(shape) << " at " << offset << " outside " << shape_str(shape_));
  return wrap(const_cast<float*>(data()) + offset, std::move(shape), device_);
}

void Tensor::resize(const Shape& shape) { resize(shape, dtype_); }

void Tensor::resize(const Shape& shape, DType dtype) {
  const int64_t n = shape_numel(shape);
  OCTET_CHECK(!view_ || dtype == dtype_,
              "a " << dtype_name(dtype_) << " view of " << shape_str(shape_) << " cannot hold " << dtype_name(dtype));
  dtype_ = dtype;
  if (static_cast<int64_t>(n * dtype_size(dtype)) > capacity_) {
    OCTET_CHECK(!view_, "a view of " << shape_str(shape_) << " cannot grow to " << shape_str(shape));
    allocate(n);
  }
  shape_ = shape;
  numel_ = n;
}

void Tensor::reshape(const Shape& shape) {
  OCTET_CHECK(shape_numel(shape) == numel_,
              "reshape " << shape_str(shape_) << " -> " << shape_str(shape) << " changes numel");
  shape_ = shape;
}

void Tensor::zero() {
  if (numel_ > 0) zero_sync(device_, raw(), bytes());
}

void Tensor::zero(const Stream& s) {
  if (numel_ == 0) return;
  if (device_ == Device::CPU) {
    std::memset(raw(), 0, bytes());
    return;
  }
  OCTET_CHECK(s.device == device_,
              "zeroing a " << device_name(device_) << " tensor on a " << device_name(s.device) << " stream");
  zero_async(raw(), bytes(), s);
}

void Tensor::fill(float v) {
  OCTET_CHECK(device_ == Device::CPU, "fill() on a " << device_name(device_) << " tensor");
  float* p = data();
  for (int64_t i = 0; i < numel_; ++i) p[i] = v;
}

Tensor Tensor::to(Device device) const {
  Tensor out(shape_, device, dtype_);
  out.copy_from(*this);
  return out;
}

void Tensor::copy_from(const Tensor& src) {
  OCTET_CHECK(src.numel_ == numel_ && src.dtype_ == dtype_,
              "copy of " << dtype_name(src.dtype_) << " " << shape_str(src.shape_) << " into " << dtype_name(dtype_)
                         << " " << shape_str(shape_));
  if (numel_ == 0) return;
  if (device_ == Device::CPU && src.device_ == Device::CPU) {
    std::memcpy(raw(), src.raw(), bytes());
    return;
  }
  OCTET_CHECK(device_ == Device::CPU || src.device_ == Device::CPU || device_ == src.device_,
              "copy from a " << device_name(src.device_) << " tensor into a " << device_name(device_) << " one");
  copy_sync(on_device(device_) ? device_ : src.device_, raw(), src.raw(), bytes(), copy_kind(device_, src.device_));
}

Tensor Tensor::as(DType dtype) const {
  Tensor host;
  const Tensor& h = on_host(host);
  Tensor out(shape_, Device::CPU, dtype);
  with_dtype(dtype_, [&](auto from) {
    const auto* src = values<decltype(from)>(h);
    with_dtype(dtype, [&](auto to) {
      auto* dst = values<decltype(to)>(out);
      for (int64_t i = 0; i < numel_; ++i) store(dst, i, load(src, i));
    });
  });
  return out;
}

namespace {
// The stream of a copy between dst and src devices must be on the device involved.
void check_copy_stream(Device dst, Device src, const Stream& s, const char* what) {
  const Device d = on_device(dst) ? dst : src;
  OCTET_CHECK((dst == Device::CPU || src == Device::CPU || dst == src) && s.device == d,
              what << " from " << device_name(src) << " to " << device_name(dst) << " on a " << device_name(s.device)
                   << " stream");
}
}  // namespace

void Tensor::copy_from(const Tensor& src, const Stream& s) {
  OCTET_CHECK(src.numel_ == numel_ && src.dtype_ == dtype_,
              "copy of " << dtype_name(src.dtype_) << " " << shape_str(src.shape_) << " into " << dtype_name(dtype_)
                         << " " << shape_str(shape_));
  if (numel_ == 0) return;
  if (device_ == Device::CPU && src.device_ == Device::CPU) {
    std::memcpy(raw(), src.raw(), bytes());
    return;
  }
  check_copy_stream(device_, src.device_, s, "a tensor copy");
  copy_async(raw(), src.raw(), bytes(), copy_kind(device_, src.device_), s);
}

void copy_rows(Tensor& dst, int64_t doff, int64_t dpitch, const Tensor& src, int64_t soff, int64_t spitch, int64_t rows,
               int64_t cols, const Stream& s) {
  if (rows <= 0 || cols <= 0) return;
  OCTET_CHECK(cols <= dpitch && cols <= spitch && doff >= 0 && soff >= 0 &&
                  doff + (rows - 1) * dpitch + cols <= dst.numel() && soff + (rows - 1) * spitch + cols <= src.numel(),
              "copy_rows: " << rows << " rows of " << cols << " (pitches " << dpitch << ", " << spitch << ", offsets "
                            << doff << ", " << soff << ") outside " << shape_str(dst.shape()) << " or "
                            << shape_str(src.shape()));
  float* d = dst.data() + doff;
  const float* x = src.data() + soff;
  if (dst.device() == Device::CPU && src.device() == Device::CPU) {
    for (int64_t i = 0; i < rows; ++i)
      std::memcpy(d + i * dpitch, x + i * spitch, sizeof(float) * static_cast<size_t>(cols));
    return;
  }
  check_copy_stream(dst.device(), src.device(), s, "copy_rows");
  copy_2d_async(d, sizeof(float) * static_cast<size_t>(dpitch), x, sizeof(float) * static_cast<size_t>(spitch),
                sizeof(float) * static_cast<size_t>(cols), static_cast<size_t>(rows),
                copy_kind(dst.device(), src.device()), s);
}

}  // namespace octet
