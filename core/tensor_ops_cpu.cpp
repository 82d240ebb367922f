// Elementwise tensor arithmetic: the device dispatch and the CPU reference loops (see tensor_ops.h).
#include "core/tensor_ops.h"

#include "core/device.h"
#include "core/error.h"
#include "core/launch.h"

namespace octet {

namespace {

void check_pair(const Tensor& a, const Tensor& b, const Exec& exec, const char* op) {
  OCTET_CHECK(a.numel() == b.numel(), op << ": " << shape_str(a.shape()) << " and " << shape_str(b.shape()));
  OCTET_CHECK(a.device() == exec.device() && b.device() == exec.device(),
              op << ": tensors on " << device_name(a.device()) << " and " << device_name(b.device()) << ", context on "
                 << device_name(exec.device()));
}

}  // namespace

void add_into_cpu(float* acc, const float* x, int64_t n, const Stream&) {
  for (int64_t i = 0; i < n; ++i) acc[i] += x[i];
}

void scale_into_cpu(float* dst, const float* src, float s, int64_t n, const Stream&) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i] * s;
}

void add_into_threads_cpu(float* acc, const float* x, int64_t n, const Stream&) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) acc[i] += x[i];
}

template <typename T>
void add_into16_cpu(T* acc, const T* x, int64_t n, const Stream&) {
  map_values(acc, n, [=](int64_t i) { return load(acc, i) + load(x, i); });
}
template void add_into16_cpu(bf16_t*, const bf16_t*, int64_t, const Stream&);
template void add_into16_cpu(fp16_t*, const fp16_t*, int64_t, const Stream&);

void add_into(Tensor& acc, const Tensor& x, const Exec& exec) {
  check_pair(acc, x, exec, "add_into");
  OCTET_CHECK(acc.dtype() == x.dtype(), "add_into: " << dtype_name(x.dtype()) << " into " << dtype_name(acc.dtype()));
  if (acc.dtype() != DType::F32)  // (a 16-bit model's activation gradients: summed in fp32)
    return with_16bit(acc.dtype(), [&](auto t) {
      using T = decltype(t);
      launch_twin("add_into (16-bit)", add_into16_cpu<T>, OCTET_CUDA_TWIN(add_into16_cuda<T>), exec.compute(),
                  values<T>(acc), values<T>(x), x.numel());
    });
  launch_twin("add_into", add_into_threads_cpu, OCTET_CUDA_TWIN(add_into_cuda), exec.compute(), acc.data(), x.data(),
              x.numel());
}

void scale_into(Tensor& dst, const Tensor& src, float s, const Exec& exec) {
  check_pair(dst, src, exec, "scale_into");
  launch_twin("scale_into", scale_into_cpu, OCTET_CUDA_TWIN(scale_into_cuda), exec.compute(), dst.data(), src.data(), s,
              src.numel());
}

}  // namespace octet
