// Conv2d on cuDNN: descriptors and algorithms cached per input shape; each pass takes the fastest deterministic
// algorithm whose workspace fits kConvWorkspaceBytes, in fp32 FMA math (no TF32), so it agrees with the CPU twin to
// float rounding and repeats bit for bit.
#include <map>

#include "core/cuda_util.cuh"
#include "layers/conv2d.h"

namespace octet {

namespace {

constexpr size_t kConvWorkspaceBytes = size_t{256} << 20;

struct ConvEntry {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, b = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  size_t workspace = 0;
  ~ConvEntry() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (b) cudnnDestroyTensorDescriptor(b);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

cudnnTensorDescriptor_t nchw(const Shape& s) {
  cudnnTensorDescriptor_t d;
  CHECK_CUDNN(cudnnCreateTensorDescriptor(&d));
  CHECK_CUDNN(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, static_cast<int>(s[0]),
                                         static_cast<int>(s[1]), static_cast<int>(s[2]), static_cast<int>(s[3])));
  return d;
}

// The first algorithm of cuDNN's ranking that succeeded, is deterministic and fits the workspace bound.
template <typename Perf>
const Perf& pick(const Perf* perf, int count, const char* pass, const Shape& in) {
  for (int i = 0; i < count; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].determinism == CUDNN_DETERMINISTIC &&
        perf[i].memory <= kConvWorkspaceBytes)
      return perf[i];
  OCTET_THROW("conv: cuDNN offers no deterministic " << pass << " algorithm within " << (kConvWorkspaceBytes >> 20)
                                                     << " MB of workspace for input " << shape_str(in));
}

}  // namespace

struct Conv2d::CudaState {
  std::map<Shape, std::unique_ptr<ConvEntry>> entries;
  Tensor workspace;  // shared by every shape (sized to the largest need), on the device
  ConvEntry& get(const Conv2dParams& p, const Shape& in, const Shape& out, Exec& ex);
};

ConvEntry& Conv2d::CudaState::get(const Conv2dParams& p, const Shape& in, const Shape& out, Exec& ex) {
  auto& slot = entries[in];
  if (slot) return *slot;
  auto e = std::make_unique<ConvEntry>();
  e->x = nchw(in);
  e->y = nchw(out);
  if (p.bias) e->b = nchw({1, p.out_channels, 1, 1});
  CHECK_CUDNN(cudnnCreateFilterDescriptor(&e->w));
  CHECK_CUDNN(cudnnSetFilter4dDescriptor(e->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, static_cast<int>(p.out_channels),
                                         static_cast<int>(p.in_channels), static_cast<int>(p.kernel),
                                         static_cast<int>(p.kernel)));
  CHECK_CUDNN(cudnnCreateConvolutionDescriptor(&e->conv));
  // Asymmetric right padding (floor semantics) is what the output shape already implies: cuDNN takes the symmetric
  // padding and computes the same output size, (H + 2P - K) / S + 1.
  CHECK_CUDNN(cudnnSetConvolution2dDescriptor(e->conv, static_cast<int>(p.padding), static_cast<int>(p.padding),
                                              static_cast<int>(p.stride), static_cast<int>(p.stride), 1, 1,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CHECK_CUDNN(cudnnSetConvolutionMathType(e->conv, CUDNN_FMA_MATH));
  cudnnHandle_t h = cudnn_of(ex);
  int n = 0;
  cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  CHECK_CUDNN(
      cudnnGetConvolutionForwardAlgorithm_v7(h, e->x, e->w, e->conv, e->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, fp));
  const auto& f = pick(fp, n, "forward", in);
  cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  CHECK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, e->w, e->y, e->conv, e->x,
                                                          CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, dp));
  const auto& d = pick(dp, n, "backward-data", in);
  cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  CHECK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, e->x, e->y, e->conv, e->w,
                                                            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, wp));
  const auto& w = pick(wp, n, "backward-filter", in);
  e->fwd = f.algo, e->bwd_data = d.algo, e->bwd_filter = w.algo;
  e->workspace = std::max({f.memory, d.memory, w.memory});
  const int64_t floats = static_cast<int64_t>((e->workspace + 3) / 4);
  if (floats > workspace.numel()) workspace = Tensor({floats}, Device::CUDA);
  slot = std::move(e);
  return *slot;
}

bool Conv2d::has_cuda() const { return true; }

void Conv2d::forward_cuda(const Tensor& x, Tensor& y, const StepContext&) {
  if (!cuda_) cuda_ = std::make_shared<CudaState>();
  ConvEntry& e = cuda_->get(p_, x.shape(), y.shape(), exec());
  const float one = 1.f, zero = 0.f;
  cudnnHandle_t h = cudnn_of(exec());
  CHECK_CUDNN(cudnnConvolutionForward(h, &one, e.x, x.data(), e.w, w_.data(), e.conv, e.fwd, cuda_->workspace.data(),
                                      e.workspace, &zero, e.y, y.data()));
  if (p_.bias) CHECK_CUDNN(cudnnAddTensor(h, &one, e.b, b_.data(), &one, e.y, y.data()));
}

void Conv2d::backward_cuda(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  if (!cuda_) cuda_ = std::make_shared<CudaState>();
  ConvEntry& e = cuda_->get(p_, x.shape(), y.shape(), exec());
  const float one = 1.f, zero = 0.f;
  cudnnHandle_t h = cudnn_of(exec());
  CHECK_CUDNN(cudnnConvolutionBackwardFilter(h, &one, e.x, x.data(), e.y, dy.data(), e.conv, e.bwd_filter,
                                             cuda_->workspace.data(), e.workspace, &zero, e.w, dw_.data()));
  if (p_.bias) CHECK_CUDNN(cudnnConvolutionBackwardBias(h, &one, e.y, dy.data(), &zero, e.b, db_.data()));
  if (dx)
    CHECK_CUDNN(cudnnConvolutionBackwardData(h, &one, e.w, w_.data(), e.y, dy.data(), e.conv, e.bwd_data,
                                             cuda_->workspace.data(), e.workspace, &zero, e.x, dx->data()));
}

}  // namespace octet
