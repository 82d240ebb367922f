// Max and average 2-D pooling (square window, stride, zero padding) on NCHW tensors: shapes in pool.cpp, the CPU
// loops in pool_cpu.cpp.
#pragma once
#include <vector>

#include "layers/layer.h"

namespace octet {

enum class PoolKind { Max, Avg };

struct PoolParams {
  PoolKind kind = PoolKind::Max;
  int64_t kernel = 2;
  int64_t stride = 2;
  int64_t padding = 0;     // average pooling excludes padded cells from the mean
  bool ceil_mode = false;  // output size rounded up (Caffe's rule), the last window clipped at the edge
};

class Pool2d : public Layer {
 public:
  Pool2d(std::string name, const PoolParams& p);
  const char* kind() const override { return p_.kind == PoolKind::Max ? "maxpool" : "avgpool"; }
  Shape output_shape(const Shape& in) const override;  // [N,C,H,W] -> [N,C,OH,OW]
  // Outputs along a side of n cells: floor((n + 2P - K) / S) + 1, or with ceil_mode the ceiling, less one where the
  // last window would start beyond the padded input's first P + n cells (Caffe's and PyTorch's rule).
  int64_t pooled_size(int64_t n) const;
  LayoutRule layout_rule() const override { return LayoutRule::Free; }    // (the CPU loops read and write either)
  bool takes_nhwc(Device d) const override { return d == Device::CUDA; }  // (its kernels index either, fp32 or 16-bit)

 protected:
  void forward_cpu(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward_cpu(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  PoolParams p_;
  std::vector<int32_t> argmax_;  // max pooling, CPU: input offset (within the channel plane) of each output's maximum

  OCTET_LAYER_CUDA_TWIN  // the CUDA twin (pool_cuda.cu)
#ifdef OCTET_WITH_CUDA
      private : Buffer<int32_t>
                    argmax_dev_{0, Device::CUDA};  // max pooling on the GPU: as argmax_
#endif
};

}  // namespace octet
