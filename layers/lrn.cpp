// Lrn, device-neutral: parameters and the output shape.
#include "layers/lrn.h"

#include "core/error.h"

namespace octet {

Lrn::Lrn(std::string name, const LrnParams& p) : Layer(std::move(name)), p_(p) {
  OCTET_CHECK(p.size > 0 && p.size % 2 == 1 && p.k > 0.f && p.alpha >= 0.f && p.beta >= 0.f,
              "lrn " << this->name() << ": size must be odd and positive, k > 0, alpha and beta >= 0");
}

Shape Lrn::output_shape(const Shape& in) const {
  OCTET_CHECK(in.size() == 4, "lrn " << name() << " expects [N,C,H,W], got " << shape_str(in));
  return in;
}

}  // namespace octet
