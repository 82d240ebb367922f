// The loss scaler (optim/loss_scale.h): its unscale pass over the gradients (optim/optimizer_kernels.h's twins) and
// the scale's growth and backoff.
#include "optim/loss_scale.h"

#include <cstring>

#include "core/error.h"
#include "core/launch.h"
#include "optim/optimizer_kernels.h"

namespace octet {

LossScaler::LossScaler(const LossScaleConfig& c, Exec& exec) : c_(c), exec_(&exec) {
  OCTET_CHECK(c.init > 0 && c.growth >= 1 && c.backoff > 0 && c.backoff < 1 && c.growth_every >= 1,
              "loss scale: init " << c.init << ", growth " << c.growth << ", backoff " << c.backoff << ", growth_every "
                                  << c.growth_every << " (expected > 0, >= 1, in (0,1), >= 1)");
  state_.data()[0] = c.init;
}

bool LossScaler::unscale(const std::vector<Param>& params) {
  const float inv = 1.f / scale();
  uint32_t host_flag = 0;
  bool dev = false;
  for (const Param& p : params) {
    if (p.grad->empty()) continue;
    if (p.grad->device() == Device::CPU) {
      unscale_cpu(p.grad->data(), p.grad->numel(), inv, &host_flag, Stream{});
      continue;
    }
    if (flag_dev_.empty()) flag_dev_ = Tensor(Shape{1}, exec_->device());
    dev = true;
    launch_twin("unscale", unscale_cpu, OCTET_CUDA_TWIN(unscale_cuda), exec_->compute(), p.grad->data(),
                p.grad->numel(), inv, reinterpret_cast<uint32_t*>(flag_dev_.data()));
  }
  if (dev) {  // the device flag (zeroed after each read) into the host one
    Tensor host(Shape{1});
    host.copy_from(flag_dev_, exec_->compute());
    flag_dev_.zero(exec_->compute());
    exec_->sync(exec_->compute());
    uint32_t f;
    std::memcpy(&f, host.data(), 4);
    host_flag |= f;
  }
  return host_flag != 0;
}

void LossScaler::update(bool overflow) {
  float* s = state_.data();
  if (overflow) {
    s[0] *= c_.backoff, s[1] = 0, s[2] += 1;
    if (++overflows_in_a_row_ >= kMaxOverflowsInARow)
      OCTET_THROW_NONFINITE("fp16 gradients held a NaN or infinity at " << overflows_in_a_row_
                                                                        << " loss scales in a row (down to " << s[0]
                                                                        << "): not an overflow, the run diverged");
    return;
  }
  overflows_in_a_row_ = 0;
  if (++s[1] >= static_cast<float>(c_.growth_every)) s[0] *= c_.growth, s[1] = 0;
}

}  // namespace octet
