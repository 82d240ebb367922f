// Seeded He, Xavier and Gaussian (fixed std) weight initialization.
#include <cmath>

#include "core/error.h"
#include "layers/layer.h"

namespace octet {

const char* init_name(Init i) { return i == Init::He ? "he" : i == Init::Xavier ? "xavier" : "gaussian"; }

void init_weights(Tensor& w, Init kind, int64_t fan_in, int64_t fan_out, Rng& rng, float std) {
  OCTET_CHECK(w.device() == Device::CPU, "init_weights on a device tensor");
  OCTET_CHECK(fan_in > 0 && fan_out > 0, "init_weights: fan_in " << fan_in << " fan_out " << fan_out);
  float* p = w.data();
  if (kind == Init::He || kind == Init::Gaussian) {
    const float sd = kind == Init::He ? std::sqrt(2.0f / static_cast<float>(fan_in)) : std;
    OCTET_CHECK(sd > 0.f, "init_weights: gaussian std " << sd);
    for (int64_t i = 0; i < w.numel(); ++i) p[i] = sd * rng.normal();
  } else {
    const float a = std::sqrt(6.0f / static_cast<float>(fan_in + fan_out));
    for (int64_t i = 0; i < w.numel(); ++i) p[i] = a * (2.0f * rng.uniform() - 1.0f);
  }
}

}  // namespace octet
