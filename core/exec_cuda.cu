// CUDA build of core/device.h's runtime wrappers and of Exec's GPU contexts: device and pinned memory, stream-ordered
// copies, the per-device streams (compute, copy, comm), events, and cuDNN/cuBLAS handles bound to the compute stream.
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <iomanip>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>

#include "core/cublas_api.h"
#include "core/device.h"
#include "core/error.h"
#include "core/exec.h"

namespace octet {

const CublasApi& cublas_api() {
  static const CublasApi api = [] {
#ifdef OCTET_CUEMU
    const std::string name = "the CUDA emulator's cuBLAS";  // linked into the test binary (tests/cuemu/dnn.cpp)
    void* lib = dlopen(nullptr, RTLD_NOW);
#else
    const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
#endif
    OCTET_CHECK(lib,
                "cannot load " << name << " (is the CUDA toolkit's lib folder on LD_LIBRARY_PATH?): " << dlerror());
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
    a.gemm_ex = reinterpret_cast<decltype(a.gemm_ex)>(sym("cublasGemmEx"));
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

const char* cuda_unavailable_reason() {
  static std::string reason;
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    cudaGetLastError();
    reason = std::string("the CUDA runtime found no usable driver or device (") + cudaGetErrorName(rc) + ": " +
             cudaGetErrorString(rc) + ")";
    return reason.c_str();
  }
  return n == 0 ? "no CUDA device is visible (CUDA_VISIBLE_DEVICES?)" : "";
}

std::string cuda_device_describe(int ordinal) {
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, ordinal));
  int driver = 0;
  CHECK_CUDA(cudaDriverGetVersion(&driver));
  const size_t dnn = cudnnGetVersion();
  std::ostringstream os;
  os << "cuda:" << ordinal << " " << prop.name << " (sm_" << prop.major << prop.minor << ", " << std::fixed
     << std::setprecision(1) << static_cast<double>(prop.totalGlobalMem) / (1u << 30) << " GiB, driver "
     << driver / 1000 << "." << (driver % 1000) / 10 << ", cuDNN " << dnn / 10000 << "." << (dnn % 10000) / 100 << "."
     << dnn % 100 << ")";
  return os.str();
}

void* cuda_alloc(size_t bytes) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, bytes));
  return p;
}

void cuda_free(void* p) {
  if (p) cudaFree(p);  // never throws from a deleter
}

void* cuda_alloc_pinned(size_t bytes) {
  void* p = nullptr;
  CHECK_CUDA(cudaMallocHost(&p, bytes));
  return p;
}

void cuda_free_pinned(void* p) {
  if (p) cudaFreeHost(p);
}

namespace {
cudaMemcpyKind memcpy_kind(CopyKind kind) {
  return kind == CopyKind::HostToDevice   ? cudaMemcpyHostToDevice
         : kind == CopyKind::DeviceToHost ? cudaMemcpyDeviceToHost
                                          : cudaMemcpyDeviceToDevice;
}
}  // namespace

void cuda_copy_async(void* dst, const void* src, size_t bytes, CopyKind kind, void* stream) {
  CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, memcpy_kind(kind), static_cast<cudaStream_t>(stream)));
}

void cuda_copy_2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                        CopyKind kind, void* stream) {
  CHECK_CUDA(
      cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, memcpy_kind(kind), static_cast<cudaStream_t>(stream)));
}

void cuda_memset_async(void* dst, size_t bytes, void* stream) {
  CHECK_CUDA(cudaMemsetAsync(dst, 0, bytes, static_cast<cudaStream_t>(stream)));
}

void cuda_copy_sync(void* dst, const void* src, size_t bytes, CopyKind kind) {
  CHECK_CUDA(cudaDeviceSynchronize());  // the legacy stream does not wait for non-blocking streams' work
  CHECK_CUDA(cudaMemcpy(dst, src, bytes, memcpy_kind(kind)));
  CHECK_CUDA(cudaDeviceSynchronize());
}

void cuda_memset_sync(void* dst, size_t bytes) {
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemset(dst, 0, bytes));
  CHECK_CUDA(cudaDeviceSynchronize());
}

Exec& Exec::cuda(int ordinal) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<Exec>> contexts;
  std::lock_guard<std::mutex> lk(mu);
  const int count = cuda_device_count();
  OCTET_CHECK(count > 0, "no CUDA device can be used: " << cuda_unavailable_reason());
  OCTET_CHECK(ordinal >= 0 && ordinal < count, "CUDA device " << ordinal << " requested but " << count << " visible");
  CHECK_CUDA(cudaSetDevice(ordinal));
  auto& slot = contexts[ordinal];
  if (!slot) {
    std::unique_ptr<Exec> e(new Exec());
    e->device_ = Device::CUDA;
    e->ordinal_ = ordinal;
    for (Stream& s : e->streams_) {
      cudaStream_t h;
      CHECK_CUDA(cudaStreamCreateWithFlags(&h, cudaStreamNonBlocking));
      s = {Device::CUDA, h};
    }
    cudnnHandle_t dnn;
    CHECK_CUDNN(cudnnCreate(&dnn));
    CHECK_CUDNN(cudnnSetStream(dnn, static_cast<cudaStream_t>(e->compute().handle)));
    cublasHandle_t blas;
    CHECK_CUBLAS(cublas_api().create(&blas));
    CHECK_CUBLAS(cublas_api().set_stream(blas, static_cast<cudaStream_t>(e->compute().handle)));
    e->cudnn_ = dnn;
    e->cublas_ = blas;
    slot = std::move(e);
  }
  return *slot;
}

bool cuda_is_device_pointer(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

void* cuda_event_record(void* stream, bool timed) {
  cudaEvent_t ev;
  CHECK_CUDA(cudaEventCreateWithFlags(&ev, timed ? cudaEventDefault : cudaEventDisableTiming));
  CHECK_CUDA(cudaEventRecord(ev, static_cast<cudaStream_t>(stream)));
  return ev;
}

float cuda_event_elapsed_ms(void* start, void* end) {
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)));
  return ms;
}

void cuda_event_destroy(void* event) {
  if (event) cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

void cuda_stream_wait(void* stream, void* event) {
  CHECK_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0));
}

void cuda_event_sync(void* event) { CHECK_CUDA(cudaEventSynchronize(static_cast<cudaEvent_t>(event))); }

void cuda_stream_sync(void* stream) { CHECK_CUDA(cudaStreamSynchronize(static_cast<cudaStream_t>(stream))); }

void cuda_set_device(int ordinal) { CHECK_CUDA(cudaSetDevice(ordinal)); }

void cuda_profiler_range(bool on) {
  CHECK_CUDA(cudaDeviceSynchronize());  // (the range holds whole steps: what they queued has run)
  if (on)
    CHECK_CUDA(cudaProfilerStart());
  else
    CHECK_CUDA(cudaProfilerStop());
}

}  // namespace octet
