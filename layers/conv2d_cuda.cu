// Conv2d on cuDNN: descriptors and algorithms cached per input shape; each pass takes the fastest deterministic
// algorithm of cuDNN's ranking that runs in fp32 FMA math (no TF32: it agrees with the CPU twin to float rounding and
// repeats bit for bit) and whose workspace, as cudnnGet*WorkspaceSize confirms it for that algorithm and math type,
// fits kConvWorkspaceBytes. Each pass has its own convolution descriptor carrying the math type its algorithm was
// ranked with. The backward-data algorithm is chosen the first time an input gradient is asked for (the first layer
// never asks).
#include <map>

#include "core/cuda_util.cuh"
#include "layers/conv2d.h"

namespace octet {

namespace {

constexpr size_t kConvWorkspaceBytes = size_t{256} << 20;

cudnnConvolutionDescriptor_t conv_desc(const Conv2dParams& p) {
  cudnnConvolutionDescriptor_t c;
  CHECK_CUDNN(cudnnCreateConvolutionDescriptor(&c));
  // Asymmetric right padding (floor semantics) is what the output shape already implies: cuDNN takes the symmetric
  // padding and computes the same output size, (H + 2P - K) / S + 1.
  CHECK_CUDNN(cudnnSetConvolution2dDescriptor(c, static_cast<int>(p.padding), static_cast<int>(p.padding),
                                              static_cast<int>(p.stride), static_cast<int>(p.stride), 1, 1,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CHECK_CUDNN(cudnnSetConvolutionGroupCount(c, static_cast<int>(p.groups)));
  CHECK_CUDNN(cudnnSetConvolutionMathType(c, CUDNN_FMA_MATH));  // what the heuristics rank for
  return c;
}

// One pass: its descriptor (math type set to its algorithm's), algorithm and confirmed workspace.
template <typename Algo>
struct Pass {
  cudnnConvolutionDescriptor_t conv = nullptr;
  Algo algo{};
  size_t workspace = 0;
  bool ready = false;
  ~Pass() {
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

struct ConvEntry {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, b = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  Pass<cudnnConvolutionFwdAlgo_t> fwd;
  Pass<cudnnConvolutionBwdDataAlgo_t> bwd_data;
  Pass<cudnnConvolutionBwdFilterAlgo_t> bwd_filter;
  ~ConvEntry() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (b) cudnnDestroyTensorDescriptor(b);
    if (w) cudnnDestroyFilterDescriptor(w);
  }
};

cudnnTensorDescriptor_t nchw(const Shape& s) {
  cudnnTensorDescriptor_t d;
  CHECK_CUDNN(cudnnCreateTensorDescriptor(&d));
  CHECK_CUDNN(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, static_cast<int>(s[0]),
                                         static_cast<int>(s[1]), static_cast<int>(s[2]), static_cast<int>(s[3])));
  return d;
}

// The first algorithm of cuDNN's ranking that succeeded, is deterministic, runs in plain fp32 math and whose confirmed
// workspace fits the bound; its math type goes onto the pass's descriptor. workspace(algo) asks cuDNN for the size.
template <typename Perf, typename Algo, typename Size>
void pick(const Perf* perf, int count, const char* pass, const Shape& in, Pass<Algo>& out, Size workspace) {
  for (int i = 0; i < count; ++i) {
    const Perf& c = perf[i];
    if (c.status != CUDNN_STATUS_SUCCESS || c.determinism != CUDNN_DETERMINISTIC ||
        (c.mathType != CUDNN_DEFAULT_MATH && c.mathType != CUDNN_FMA_MATH))
      continue;
    CHECK_CUDNN(cudnnSetConvolutionMathType(out.conv, c.mathType));
    size_t bytes = 0;
    if (workspace(c.algo, &bytes) != CUDNN_STATUS_SUCCESS) continue;
    bytes = std::max(bytes, c.memory);
    if (bytes > kConvWorkspaceBytes) continue;
    out.algo = c.algo, out.workspace = bytes, out.ready = true;
    return;
  }
  OCTET_THROW("conv: cuDNN offers no deterministic fp32 " << pass << " algorithm within " << (kConvWorkspaceBytes >> 20)
                                                          << " MB of workspace for input " << shape_str(in));
}

}  // namespace

struct Conv2d::CudaState {
  std::map<Shape, std::unique_ptr<ConvEntry>> entries;
  Tensor workspace;  // shared by every shape and pass (sized to the largest need), on the device
  ConvEntry& get(const Conv2dParams& p, const Shape& in, const Shape& out, Exec& ex);
  void need_bwd_data(ConvEntry& e, const Shape& in, Exec& ex);
  void grow(size_t bytes) {
    const int64_t floats = static_cast<int64_t>((bytes + 3) / 4);
    if (floats > workspace.numel()) workspace = Tensor({floats}, Device::CUDA);  // (cudaFree waits for its users)
  }
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
                                         static_cast<int>(p.in_channels / p.groups), static_cast<int>(p.kernel),
                                         static_cast<int>(p.kernel)));
  e->fwd.conv = conv_desc(p), e->bwd_data.conv = conv_desc(p), e->bwd_filter.conv = conv_desc(p);
  cudnnHandle_t h = cudnn_of(ex);
  int n = 0;
  cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  CHECK_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(h, e->x, e->w, e->fwd.conv, e->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                     &n, fp));
  ConvEntry* ep = e.get();
  pick(fp, n, "forward", in, e->fwd, [&](cudnnConvolutionFwdAlgo_t a, size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, ep->x, ep->w, ep->fwd.conv, ep->y, a, bytes);
  });
  cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  CHECK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, e->x, e->y, e->bwd_filter.conv, e->w,
                                                            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, wp));
  pick(wp, n, "backward-filter", in, e->bwd_filter, [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, ep->x, ep->y, ep->bwd_filter.conv, ep->w, a, bytes);
  });
  grow(std::max(e->fwd.workspace, e->bwd_filter.workspace));
  slot = std::move(e);
  return *slot;
}

void Conv2d::CudaState::need_bwd_data(ConvEntry& e, const Shape& in, Exec& ex) {
  if (e.bwd_data.ready) return;
  cudnnHandle_t h = cudnn_of(ex);
  int n = 0;
  cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  CHECK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, e.w, e.y, e.bwd_data.conv, e.x,
                                                          CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, dp));
  pick(dp, n, "backward-data", in, e.bwd_data, [&](cudnnConvolutionBwdDataAlgo_t a, size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, e.w, e.y, e.bwd_data.conv, e.x, a, bytes);
  });
  grow(e.bwd_data.workspace);
}

bool Conv2d::has_cuda() const { return true; }

void Conv2d::forward_cuda(const Tensor& x, Tensor& y, const StepContext&) {
  if (!cuda_) cuda_ = std::make_shared<CudaState>();
  ConvEntry& e = cuda_->get(p_, x.shape(), y.shape(), exec());
  const float one = 1.f, zero = 0.f;
  cudnnHandle_t h = cudnn_of(exec());
  CHECK_CUDNN(cudnnConvolutionForward(h, &one, e.x, x.data(), e.w, w_.data(), e.fwd.conv, e.fwd.algo,
                                      cuda_->workspace.data(), e.fwd.workspace, &zero, e.y, y.data()));
  if (p_.bias) CHECK_CUDNN(cudnnAddTensor(h, &one, e.b, b_.data(), &one, e.y, y.data()));
}

void Conv2d::backward_cuda(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  if (!cuda_) cuda_ = std::make_shared<CudaState>();
  ConvEntry& e = cuda_->get(p_, x.shape(), y.shape(), exec());
  const float one = 1.f, zero = 0.f;
  cudnnHandle_t h = cudnn_of(exec());
  CHECK_CUDNN(cudnnConvolutionBackwardFilter(h, &one, e.x, x.data(), e.y, dy.data(), e.bwd_filter.conv,
                                             e.bwd_filter.algo, cuda_->workspace.data(), e.bwd_filter.workspace, &zero,
                                             e.w, dw_.data()));
  if (p_.bias) CHECK_CUDNN(cudnnConvolutionBackwardBias(h, &one, e.y, dy.data(), &zero, e.b, db_.data()));
  if (dx) {
    cuda_->need_bwd_data(e, x.shape(), exec());
    CHECK_CUDNN(cudnnConvolutionBackwardData(h, &one, e.w, w_.data(), e.y, dy.data(), e.bwd_data.conv, e.bwd_data.algo,
                                             cuda_->workspace.data(), e.bwd_data.workspace, &zero, e.x, dx->data()));
  }
}

}  // namespace octet
