// Tensor: a dense fp32 array in NCHW order with owning, 64-byte aligned storage on an explicit device.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace octet {

enum class Device { CPU, CUDA };
const char* device_name(Device d);

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[64,1,28,28]"

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape, Device device = Device::CPU);  // zero-filled
  Tensor(const Tensor& other);                                // deep copy, same device
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;

  const Shape& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_.at(i); }
  size_t ndim() const { return shape_.size(); }
  int64_t numel() const { return numel_; }
  size_t bytes() const { return static_cast<size_t>(numel_) * sizeof(float); }
  Device device() const { return device_; }
  bool empty() const { return numel_ == 0; }

  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }

  // Changes the shape; reallocates (zero-filled) only when the capacity is too small.
  void resize(const Shape& shape);
  // Reinterprets the same elements under another shape with the same numel.
  void reshape(const Shape& shape);
  void zero();
  void fill(float v);  // CPU only
  Tensor to(Device device) const;
  void copy_from(const Tensor& src);  // same numel; any devices

 private:
  void allocate(int64_t n);
  Shape shape_;
  int64_t numel_ = 0;
  int64_t capacity_ = 0;
  Device device_ = Device::CPU;
  std::unique_ptr<float, void (*)(float*)> data_{nullptr, [](float*) {}};
};

}  // namespace octet
