// The host Exec, and in a CPU-only build the CUDA entry points that say why there is no GPU here.
#include "core/device.h"
#include "core/error.h"
#include "core/exec.h"

namespace octet {

Exec& Exec::host() {
  static Exec* e = [] {
    auto* x = new Exec();
    x->device_ = Device::CPU;
    return x;
  }();
  return *e;
}

#ifndef OCTET_WITH_CUDA

Exec& Exec::cuda(int) { OCTET_THROW("no CUDA device can be used: " << cuda_unavailable_reason()); }

void Exec::bind_thread() const {}
Event Exec::record(Stream) const { return Event(); }
void Exec::wait(Stream, const Event&) const {}
void Exec::sync(const Event&) const {}
void Exec::sync(Stream) const {
}  // CPU ops (oneDNN's included: its CPU stream runs them in order) finish before they return

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
const char* cuda_unavailable_reason() {
  return "this octet was built without CUDA (configure with -DOCTET_CUDA=ON where nvcc, cuDNN and cuBLAS are)";
}

#define OCTET_NO_CUDA OCTET_THROW(cuda_unavailable_reason())
std::string cuda_device_describe(int) { OCTET_NO_CUDA; }
void* cuda_alloc(size_t) { OCTET_NO_CUDA; }
void cuda_free(void*) {}
void* cuda_alloc_pinned(size_t) { OCTET_NO_CUDA; }
void cuda_free_pinned(void*) {}
void cuda_copy_async(void*, const void*, size_t, CopyKind, void*) { OCTET_NO_CUDA; }
void cuda_memset_async(void*, size_t, void*) { OCTET_NO_CUDA; }
void cuda_copy_2d_async(void*, size_t, const void*, size_t, size_t, size_t, CopyKind, void*) { OCTET_NO_CUDA; }
void cuda_copy_sync(void*, const void*, size_t, CopyKind) { OCTET_NO_CUDA; }
void cuda_memset_sync(void*, size_t) { OCTET_NO_CUDA; }

#endif

}  // namespace octet
