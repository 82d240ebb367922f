// Tensor: a dense array of fp32 (or, for activations carried in bf16 between layers, bf16) values in NCHW order (or
// a layout, core/layout.h) on an explicit device, owning (64-byte aligned, zero-filled) storage or viewing another's;
// Buffer<T>: a device-tagged array of bytes or integers (payloads, labels). Copies and zeroing are ordered on a stream
// (core/exec.h); on the CPU they are done when they return.
#pragma once
#include <cstdint>
#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/device.h"
#include "core/precision.h"

namespace octet {

struct Stream;

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[64,1,28,28]"

// A tensor's element type: fp32 (everything but activations in a 16-bit model), bf16 (Model::set_layout's
// activations of a bf16 model: channel-blocked on the CPU, channels-last on a GPU) or fp16 (an fp16 model's on a GPU).
enum class DType : uint8_t { F32, Bf16, F16 };
inline size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }
const char* dtype_name(DType t);  // "fp32", "bf16", "fp16"
// The element type of a 16-bit precision's activations (bf16 or fp16; precision p is 16-bit).
inline DType activation_type(Precision p) { return p == Precision::Fp16 ? DType::F16 : DType::Bf16; }

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape, Device device = Device::CPU, DType dtype = DType::F32);  // zero-filled
  Tensor(const Tensor& other);             // deep copy, same device (a view's copy owns its data)
  Tensor& operator=(const Tensor& other);  // deep copy into this storage (a view writes through)
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&& other);  // takes the storage over; into a view: copies (writes through), like the above

  // A host tensor for copies to and from a device (core/device.h's pinned_alloc: page-locked on a GPU machine); its
  // reallocations stay so.
  static Tensor pinned(Shape shape);
  // A non-owning tensor over n = shape_numel(shape) floats at data (the owner must outlive it).
  static Tensor wrap(float* data, Shape shape, Device device = Device::CPU);
  // The same over storage of either element type.
  static Tensor wrap(void* data, Shape shape, Device device, DType dtype);
  // Elements [offset, offset + numel(shape)) of this tensor as a view of that shape.
  Tensor view(int64_t offset, Shape shape) const;

  const Shape& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_.at(i); }
  size_t ndim() const { return shape_.size(); }
  int64_t numel() const { return numel_; }
  int64_t capacity() const { return capacity_ / static_cast<int64_t>(dtype_size(dtype_)); }  // without reallocating
  size_t bytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool empty() const { return numel_ == 0; }
  bool is_view() const { return view_; }
  bool is_pinned() const { return pinned_; }

  // The values of an fp32 tensor (checked: a 16-bit one's are bf16() or fp16()).
  float* data() {
    if (dtype_ != DType::F32) throw_dtype("data()");
    return data_.get();
  }
  const float* data() const { return const_cast<Tensor*>(this)->data(); }
  bf16_t* bf16() {
    if (dtype_ != DType::Bf16) throw_dtype("bf16()");
    return reinterpret_cast<bf16_t*>(data_.get());
  }
  const bf16_t* bf16() const { return const_cast<Tensor*>(this)->bf16(); }
  fp16_t* fp16() {
    if (dtype_ != DType::F16) throw_dtype("fp16()");
    return reinterpret_cast<fp16_t*>(data_.get());
  }
  const fp16_t* fp16() const { return const_cast<Tensor*>(this)->fp16(); }
  void* raw() { return data_.get(); }  // either type's storage (copies, oneDNN memory)
  const void* raw() const { return data_.get(); }

  // Changes the shape; reallocates (zero-filled) only when the capacity is too small (a view cannot grow).
  void resize(const Shape& shape);
  // The same with the element type: a tensor reused for another type's values (a view's cannot change).
  void resize(const Shape& shape, DType dtype);
  // Reinterprets the same elements under another shape with the same numel.
  void reshape(const Shape& shape);
  void zero();                     // host tensors; a device tensor on its device's default order
  void zero(const Stream& s);      // queued on s (a device tensor) or done now (host)
  void fill(float v);              // CPU only
  Tensor to(Device device) const;  // a copy on device (same type), complete when it returns
  // This tensor when it is on the host, else a host copy of it kept in `copy` (synchronous: set-up, checks and error
  // paths, never a step's inner loop).
  const Tensor& on_host(Tensor& copy) const { return device() == Device::CPU ? *this : (copy = to(Device::CPU)); }
  void copy_from(const Tensor& src);                   // same numel and type; any devices; complete when it returns
  void copy_from(const Tensor& src, const Stream& s);  // queued on s when a device is involved
  // A host copy in another element type (16-bit rounded to nearest even; fp32 exact): checks, tests, error paths.
  Tensor as(DType dtype) const;

 private:
  void allocate(int64_t n);  // n elements of dtype_
  [[noreturn]] void throw_dtype(const char* accessor) const;
  Shape shape_;
  int64_t numel_ = 0;
  int64_t capacity_ = 0;  // bytes
  Device device_ = Device::CPU;
  DType dtype_ = DType::F32;
  bool view_ = false;
  bool pinned_ = false;  // host storage page-locked (reallocations stay so)
  std::unique_ptr<float, void (*)(float*)> data_{nullptr, [](float*) {}};
};

// The values of t as T (float: data(), bf16_t: bf16(), fp16_t: fp16(); checked), for loops templated on the element
// type.
template <typename T>
T* values(Tensor& t);
template <>
inline float* values<float>(Tensor& t) {
  return t.data();
}
template <>
inline bf16_t* values<bf16_t>(Tensor& t) {
  return t.bf16();
}
template <>
inline fp16_t* values<fp16_t>(Tensor& t) {
  return t.fp16();
}
template <typename T>
const T* values(const Tensor& t) {
  return values<T>(const_cast<Tensor&>(t));
}
// fn(T{}) for the element type T of dtype (float, bf16_t or fp16_t): a loop template instantiated for the type it is
// given.
template <typename Fn>
decltype(auto) with_dtype(DType dtype, Fn fn) {
  return dtype == DType::F32 ? fn(float{}) : dtype == DType::Bf16 ? fn(bf16_t{}) : fn(fp16_t{});
}
// The same over the 16-bit types alone (a 16-bit activation's loops; dtype bf16 or fp16).
template <typename Fn>
decltype(auto) with_16bit(DType dtype, Fn fn) {
  return dtype == DType::Bf16 ? fn(bf16_t{}) : fn(fp16_t{});
}

// A strided block copy between any devices: `rows` runs of `cols` floats, run i from src[soff + i * spitch] to
// dst[doff + i * dpitch] (a column block of a row-major matrix to a dense block and back). Queued on s when a device is
// involved (host memory should then be page-locked); on the CPU done when it returns.
void copy_rows(Tensor& dst, int64_t doff, int64_t dpitch, const Tensor& src, int64_t soff, int64_t spitch, int64_t rows,
               int64_t cols, const Stream& s);

// A device-tagged view of n elements (what codecs and transports take: they check where the data is).
template <typename T>
struct Span {
  T* data = nullptr;
  size_t size = 0;
  Device device = Device::CPU;
};
inline Span<const float> span_of(const Tensor& t) { return {t.data(), static_cast<size_t>(t.numel()), t.device()}; }
inline Span<float> span_of(Tensor& t) { return {t.data(), static_cast<size_t>(t.numel()), t.device()}; }

template <typename T>
class Buffer {
 public:
  explicit Buffer(size_t n = 0, Device device = Device::CPU) : device_(device) { resize(n); }
  ~Buffer() { device_free(device_, data_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept : device_(o.device_), size_(o.size_), capacity_(o.capacity_), data_(o.data_) {
    o.data_ = nullptr, o.size_ = o.capacity_ = 0;
  }
  Buffer& operator=(Buffer&& o) noexcept {
    std::swap(device_, o.device_), std::swap(size_, o.size_), std::swap(capacity_, o.capacity_),
        std::swap(data_, o.data_);
    return *this;
  }
  // Raw storage of a device (core/device.h) for what is not fp32 values: payload bytes, labels. Grows the storage when
  // needed (keeping the first size() elements on the CPU; new ones are not initialized).
  void resize(size_t n) {
    if (n > capacity_) {
      T* p = static_cast<T*>(device_alloc(device_, n * sizeof(T)));
      if (device_ == Device::CPU && size_) std::copy(data_, data_ + size_, p);
      device_free(device_, data_);
      data_ = p, capacity_ = n;
    }
    size_ = n;
  }
  void assign(size_t n, T v) {  // CPU only
    resize(n);
    std::fill(data_, data_ + n, v);
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  size_t size() const { return size_; }
  Device device() const { return device_; }

 private:
  Device device_;
  size_t size_ = 0, capacity_ = 0;
  T* data_ = nullptr;
};

}  // namespace octet
