// What the CUDA emulator's parts share (tests/cuemu): the device lock, the sticky error and its message, and the
// memory map that tells device allocations from host pointers.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>
#include <string>

namespace cuemu {

// Held while a kernel, copy or library call runs: work of different host threads runs one item at a time, as if on
// one device, in the order it was issued.
std::recursive_mutex& device_lock();

// The error a later runtime call returns (cudaGetLastError clears it; a kernel's fault stays, as on a GPU).
void fail(cudaError_t e, const std::string& why);
cudaError_t last_error(bool clear);
bool sticky_failure();  // a kernel failed: every later call fails
const char* error_text(cudaError_t e);

// A host wait for the device (CUEMU_WAIT_TRACE=1 lists their call sites at exit).
void count_host_wait();

// The kernel running now, for the fault handler's line ("" between kernels).
const char* running_kernel();

// Device allocations (guarded at their end) and page-locked host ones.
void* device_alloc(size_t bytes);
bool device_free(void* p);
bool is_device(const void* p);

}  // namespace cuemu
