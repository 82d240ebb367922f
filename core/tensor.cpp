// Tensor storage management: aligned host allocation, device allocation through core/device.h, copies.
#include "core/tensor.h"

#include <cstdlib>
#include <cstring>

#include "core/device.h"
#include "core/error.h"

namespace octet {

const char* device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    OCTET_CHECK(d >= 0, "negative dimension in shape " << shape_str(s));
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(s[i]);
  }
  out += ']';
  return out;
}

static void host_free(float* p) { std::free(p); }
static void device_free(float* p) { cuda_free(p); }

void Tensor::allocate(int64_t n) {
  if (n == 0) {
    data_ = {nullptr, [](float*) {}};
    capacity_ = 0;
    return;
  }
  if (device_ == Device::CPU) {
    size_t bytes = (static_cast<size_t>(n) * sizeof(float) + 63) / 64 * 64;
    float* p = static_cast<float*>(std::aligned_alloc(64, bytes));
    OCTET_CHECK(p, "out of host memory allocating " << bytes << " bytes");
    std::memset(p, 0, bytes);
    data_ = {p, host_free};
  } else {
    float* p = cuda_alloc_floats(static_cast<size_t>(n));
    cuda_memset_zero(p, static_cast<size_t>(n) * sizeof(float));
    data_ = {p, device_free};
  }
  capacity_ = n;
}

Tensor::Tensor(Shape shape, Device device) : shape_(std::move(shape)), device_(device) {
  numel_ = shape_numel(shape_);
  allocate(numel_);
}

Tensor::Tensor(const Tensor& other) : shape_(other.shape_), numel_(other.numel_), device_(other.device_) {
  allocate(numel_);
  copy_from(other);
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this == &other) return *this;
  if (device_ != other.device_ || capacity_ < other.numel_) {
    device_ = other.device_;
    allocate(other.numel_);
  }
  shape_ = other.shape_;
  numel_ = other.numel_;
  copy_from(other);
  return *this;
}

void Tensor::resize(const Shape& shape) {
  int64_t n = shape_numel(shape);
  if (n > capacity_) allocate(n);
  shape_ = shape;
  numel_ = n;
}

void Tensor::reshape(const Shape& shape) {
  OCTET_CHECK(shape_numel(shape) == numel_, "reshape " << shape_str(shape_) << " -> " << shape_str(shape) << " changes numel");
  shape_ = shape;
}

void Tensor::zero() {
  if (numel_ == 0) return;
  if (device_ == Device::CPU) std::memset(data(), 0, bytes());
  else cuda_memset_zero(data(), bytes());
}

void Tensor::fill(float v) {
  OCTET_CHECK(device_ == Device::CPU, "fill() on a " << device_name(device_) << " tensor");
  float* p = data();
  for (int64_t i = 0; i < numel_; ++i) p[i] = v;
}

Tensor Tensor::to(Device device) const {
  Tensor out(shape_, device);
  out.copy_from(*this);
  return out;
}

void Tensor::copy_from(const Tensor& src) {
  OCTET_CHECK(src.numel_ == numel_, "copy of " << shape_str(src.shape_) << " into " << shape_str(shape_));
  if (numel_ == 0) return;
  if (device_ == Device::CPU && src.device_ == Device::CPU) {
    std::memcpy(data(), src.data(), bytes());
    return;
  }
  CopyKind kind = device_ == Device::CPU ? CopyKind::DeviceToHost
                  : src.device_ == Device::CPU ? CopyKind::HostToDevice : CopyKind::DeviceToDevice;
  cuda_copy(data(), src.data(), bytes(), kind);
}

}  // namespace octet
