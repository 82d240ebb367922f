// CUDA build of core/device.h: device memory, copies and the per-process context with streams and cuDNN/cuBLAS handles.
#include <cuda_runtime.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <map>
#include <memory>
#include <string>

#include "core/cublas_api.h"
#include "core/device.h"
#include "core/error.h"

namespace octet {

const CublasApi& cublas_api() {
  static const CublasApi api = [] {
    const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
    OCTET_CHECK(lib, "cannot load " << name << " (is the CUDA toolkit's lib folder on LD_LIBRARY_PATH?): " << dlerror());
    auto sym = [&](const char* fn) {
      void* p = dlsym(lib, fn);
      OCTET_CHECK(p, name << " lacks " << fn);
      return p;
    };
    CublasApi a;
    a.create = reinterpret_cast<decltype(a.create)>(sym("cublasCreate_v2"));
    a.destroy = reinterpret_cast<decltype(a.destroy)>(sym("cublasDestroy_v2"));
    a.set_stream = reinterpret_cast<decltype(a.set_stream)>(sym("cublasSetStream_v2"));
    a.sgemm = reinterpret_cast<decltype(a.sgemm)>(sym("cublasSgemm_v2"));
    a.status_string = reinterpret_cast<decltype(a.status_string)>(sym("cublasGetStatusString"));
    return a;
  }();
  return api;
}

bool cuda_built() { return true; }

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

float* cuda_alloc_floats(size_t n) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, n * sizeof(float)));
  return static_cast<float*>(p);
}

void cuda_free(float* p) {
  if (p) cudaFree(p);  // never throws from a deleter
}

void cuda_copy(void* dst, const void* src, size_t bytes, CopyKind kind) {
  cudaMemcpyKind k = kind == CopyKind::HostToDevice ? cudaMemcpyHostToDevice
                     : kind == CopyKind::DeviceToHost ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
  CHECK_CUDA(cudaMemcpy(dst, src, bytes, k));
}

void cuda_memset_zero(void* dst, size_t bytes) { CHECK_CUDA(cudaMemset(dst, 0, bytes)); }

void cuda_synchronize() { CHECK_CUDA(cudaDeviceSynchronize()); }

CudaContext& cuda_context(int device) {
  static std::map<int, std::unique_ptr<CudaContext>> contexts;
  int count = cuda_device_count();
  OCTET_CHECK(device >= 0 && device < count, "CUDA device " << device << " requested but " << count << " visible");
  CHECK_CUDA(cudaSetDevice(device));
  auto& slot = contexts[device];
  if (!slot) {
    auto ctx = std::make_unique<CudaContext>();
    ctx->device = device;
    cudaStream_t compute, copy;
    CHECK_CUDA(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    CHECK_CUDA(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    cudnnHandle_t dnn;
    CHECK_CUDNN(cudnnCreate(&dnn));
    CHECK_CUDNN(cudnnSetStream(dnn, compute));
    cublasHandle_t blas;
    CHECK_CUBLAS(cublas_api().create(&blas));
    CHECK_CUBLAS(cublas_api().set_stream(blas, compute));
    ctx->compute_stream = compute;
    ctx->copy_stream = copy;
    ctx->cudnn = dnn;
    ctx->cublas = blas;
    slot = std::move(ctx);
  }
  return *slot;
}

CudaContext& cuda_current_context() {
  int device = 0;
  CHECK_CUDA(cudaGetDevice(&device));
  return cuda_context(device);
}

}  // namespace octet
