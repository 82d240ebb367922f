// Device memory primitives behind Tensor and Buffer: allocation, stream-ordered copies and zeroing. A CPU-only build
// reports that no CUDA backend exists (every call then throws, naming what is missing).
#pragma once
#include <cstddef>
#include <string>

namespace octet {

bool cuda_built();        // compiled with the CUDA backend
int cuda_device_count();  // 0 when not built or no device/driver
// Why no GPU can be used here, for errors ("this octet was built without CUDA", "no CUDA device is visible", ...);
// "" when device 0 is usable.
const char* cuda_unavailable_reason();
// "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB, driver 13.0, cuDNN 9.x)" for logs; throws where no GPU can be used.
std::string cuda_device_describe(int ordinal);
void* cuda_alloc(size_t bytes);         // device memory
void cuda_free(void* p);                // never throws
void* cuda_alloc_pinned(size_t bytes);  // page-locked host memory (fast, asynchronous copies)
void cuda_free_pinned(void* p);
enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };
// Queued on stream (a cudaStream_t); the caller orders what reads the result after it.
void cuda_copy_async(void* dst, const void* src, size_t bytes, CopyKind kind, void* stream);
void cuda_memset_async(void* dst, size_t bytes, void* stream);
// height rows of width bytes, row i from src + i * spitch to dst + i * dpitch (cudaMemcpy2DAsync), queued on stream.
void cuda_copy_2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                        CopyKind kind, void* stream);
// Complete when they return, after everything queued on the device (any stream): for set-up and tests, not hot paths.
void cuda_copy_sync(void* dst, const void* src, size_t bytes, CopyKind kind);
void cuda_memset_sync(void* dst, size_t bytes);

}  // namespace octet
