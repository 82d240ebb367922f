// CUDA twin of the "fp16" codec: Codec16's kernels (codec16_cuda.cuh) through half_math.h's conversions.
#include "compress/codec16_cuda.cuh"
#include "compress/fp16.h"

namespace octet {

template size_t Codec16<Fp16Format>::encode_cuda(const float*, int64_t, uint8_t*, Exec&) const;
template void Codec16<Fp16Format>::decode_cuda(const uint8_t*, float*, int64_t, bool, Exec&) const;
template size_t Codec16<Fp16Format>::reduce_encode_cuda(const uint8_t* const*, int, int64_t, float*, uint8_t*,
                                                        Exec&) const;

}  // namespace octet
