// CUDA twin of the "bf16" codec: Codec16's kernels (codec16_cuda.cuh) through Bf16Format's conversions.
#include "compress/codec16_cuda.cuh"
#include "compress/bf16.h"

namespace octet {

template size_t Codec16<Bf16Format>::encode_cuda(const float*, int64_t, uint8_t*, Exec&) const;
template void Codec16<Bf16Format>::decode_cuda(const uint8_t*, float*, int64_t, bool, Exec&) const;
template size_t Codec16<Bf16Format>::reduce_encode_cuda(const uint8_t* const*, int, int64_t, float*, uint8_t*,
                                                        Exec&) const;

}  // namespace octet
