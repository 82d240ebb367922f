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

void add_into_bf16_cpu(bf16_t* acc, const bf16_t* x, int64_t n, const Stream&) {
  map_values(acc, n, [=](int64_t i) { return load(acc, i) + load(x, i); });
}

void add_into(Tensor& acc, const Tensor& x, const Exec& exec) {
  check_pair(acc, x, exec, "add_into");
  OCTET_CHECK(acc.dtype() == x.dtype(), "add_into: " << dtype_name(x.dtype()) << " into " << dtype_name(acc.dtype()));
  if (acc.dtype() == DType::Bf16)  // (a bf16 model's activation gradients: summed in fp32)
    return launch_twin("add_into (bf16)", add_into_bf16_cpu, OCTET_CUDA_TWIN(add_into_bf16_cuda), exec.compute(),
                       acc.bf16(), x.bf16(), x.numel());
  launch_twin("add_into", add_into_threads_cpu, OCTET_CUDA_TWIN(add_into_cuda), exec.compute(), acc.data(), x.data(),
              x.numel());
}

void scale_into(Tensor& dst, const Tensor& src, float s, const Exec& exec) {
  check_pair(dst, src, exec, "scale_into");
  launch_twin("scale_into", scale_into_cpu, OCTET_CUDA_TWIN(scale_into_cuda), exec.compute(), dst.data(), src.data(), s,
              src.numel());
}

}  // namespace octet
