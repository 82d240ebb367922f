// CPU-only build of core/device.h: reports that no CUDA backend was compiled in.
#include "core/device.h"
#include "core/error.h"

namespace octet {

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }

#define OCTET_NO_CUDA OCTET_THROW("this octet was built without CUDA (configure with -DOCTET_CUDA=ON on a machine with nvcc)")
float* cuda_alloc_floats(size_t) { OCTET_NO_CUDA; }
void cuda_free(float*) {}
void cuda_copy(void*, const void*, size_t, CopyKind) { OCTET_NO_CUDA; }
void cuda_memset_zero(void*, size_t) { OCTET_NO_CUDA; }
void cuda_synchronize() {}
CudaContext& cuda_context(int) { OCTET_NO_CUDA; }
CudaContext& cuda_current_context() { OCTET_NO_CUDA; }

}  // namespace octet
