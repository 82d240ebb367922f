// Device memory primitives and the CUDA device context (streams, cuDNN/cuBLAS handles); CPU-only builds report their absence.
#pragma once
#include <cstddef>

namespace octet {

bool cuda_built();          // compiled with the CUDA backend
int cuda_device_count();    // 0 when not built or no device/driver
float* cuda_alloc_floats(size_t n);
void cuda_free(float* p);
enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };
void cuda_copy(void* dst, const void* src, size_t bytes, CopyKind kind);
void cuda_memset_zero(void* dst, size_t bytes);
void cuda_synchronize();

// Per-process GPU context: the compute and copy streams and the library handles (created on first use).
struct CudaContext {
  int device = -1;
  void* compute_stream = nullptr;  // cudaStream_t
  void* copy_stream = nullptr;     // cudaStream_t
  void* cudnn = nullptr;           // cudnnHandle_t
  void* cublas = nullptr;          // cublasHandle_t
};
CudaContext& cuda_context(int device);  // binds the device and lazily creates streams and handles
CudaContext& cuda_current_context();    // the context of the device this thread has bound

}  // namespace octet
