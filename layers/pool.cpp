// Pool2d, device-neutral: parameters and the output shape.
#include "layers/pool.h"

#include "core/error.h"

namespace octet {

Pool2d::Pool2d(std::string name, const PoolParams& p) : Layer(std::move(name)), p_(p) {
  OCTET_CHECK(p.kernel > 0 && p.stride > 0 && p.padding >= 0 && p.padding < p.kernel,
              kind() << " " << this->name() << ": bad parameters");
}

Shape Pool2d::output_shape(const Shape& in) const {
  OCTET_CHECK(in.size() == 4, kind() << " " << name() << " expects [N,C,H,W], got " << shape_str(in));
  // Checked before dividing: C++ division truncates toward zero, so (H - K) / S + 1 is 1 for -S < H - K < 0.
  OCTET_CHECK(in[2] + 2 * p_.padding >= p_.kernel && in[3] + 2 * p_.padding >= p_.kernel,
              kind() << " " << name() << ": window " << p_.kernel << " larger than padded input " << shape_str(in));
  const int64_t oh = (in[2] + 2 * p_.padding - p_.kernel) / p_.stride + 1;
  const int64_t ow = (in[3] + 2 * p_.padding - p_.kernel) / p_.stride + 1;
  return {in[0], in[1], oh, ow};
}

}  // namespace octet
