// Conv2d on cuDNN: descriptors and algorithms cached per input shape. With parallel.deterministic (the default) each
// pass takes the first deterministic algorithm of cuDNN's heuristic ranking whose math the precision allows (fp32: FMA
// math, no TF32, so it agrees with the CPU twin to float rounding and repeats bit for bit; tf32, bf16, fp16: tensor
// cores) and whose workspace, as cudnnGet*WorkspaceSize confirms it for that algorithm and math type, fits
// kConvWorkspaceBytes; without it, the fastest such algorithm as cudnnFind*Ex times them once per shape. Each pass has
// its own convolution descriptor carrying its algorithm's math type. bf16 and fp16 convolve 16-bit channels-last
// (NHWC, filters KRSC) operands with fp32 accumulation: a bf16 model's channels-last bf16 activations as they are
// (Model::set_layout), fp32 NCHW ones through transposing casts (layers/mixed_cuda.cuh), their results coming back
// the same way; the weights' 16-bit copy is made by forward and read again by backward; the bias and its gradient
// stay fp32, added (with a fused ReLU's clamp) and summed by layers/conv_bias_cuda.cuh's kernels. The backward-data
// algorithm is chosen the first time an input gradient is asked for (the first layer never asks).
#include <map>

#include "core/cuda_util.cuh"
#include "layers/conv2d.h"
#include "layers/conv_bias_cuda.cuh"
#include "layers/mixed_cuda.cuh"
#include "layers/relu.h"

namespace octet {

namespace {

constexpr size_t kConvWorkspaceBytes = size_t{256} << 20;

cudnnConvolutionDescriptor_t conv_desc(const Conv2dParams& p, Precision prec) {
  cudnnConvolutionDescriptor_t c;
  CHECK_CUDNN(cudnnCreateConvolutionDescriptor(&c));
  // Asymmetric right padding (floor semantics) is what the output shape already implies: cuDNN takes the symmetric
  // padding and computes the same output size, (H + 2P - K) / S + 1.
  CHECK_CUDNN(cudnnSetConvolution2dDescriptor(c, static_cast<int>(p.padding), static_cast<int>(p.padding),
                                              static_cast<int>(p.stride), static_cast<int>(p.stride), 1, 1,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CHECK_CUDNN(cudnnSetConvolutionGroupCount(c, static_cast<int>(p.groups)));
  // what the heuristics rank for
  CHECK_CUDNN(cudnnSetConvolutionMathType(c, prec == Precision::Fp32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
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
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, b = nullptr;  // x, y in the operands' type
  cudnnTensorDescriptor_t y32 = nullptr;                          // y in fp32 NCHW (the bias gradient)
  cudnnFilterDescriptor_t w = nullptr;
  Pass<cudnnConvolutionFwdAlgo_t> fwd;
  Pass<cudnnConvolutionBwdDataAlgo_t> bwd_data;
  Pass<cudnnConvolutionBwdFilterAlgo_t> bwd_filter;
  ~ConvEntry() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (b) cudnnDestroyTensorDescriptor(b);
    if (y32) cudnnDestroyTensorDescriptor(y32);
    if (w) cudnnDestroyFilterDescriptor(w);
  }
};

// An [N, C, H, W] tensor's descriptor: fp32 NCHW, or a 16-bit type's channels-last copy.
cudnnTensorDescriptor_t nchw(const Shape& s, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  cudnnTensorDescriptor_t d;
  CHECK_CUDNN(cudnnCreateTensorDescriptor(&d));
  CHECK_CUDNN(cudnnSetTensor4dDescriptor(d, type == CUDNN_DATA_FLOAT ? CUDNN_TENSOR_NCHW : CUDNN_TENSOR_NHWC, type,
                                         static_cast<int>(s[0]), static_cast<int>(s[1]), static_cast<int>(s[2]),
                                         static_cast<int>(s[3])));
  return d;
}

// An [N, C, H, W] fp32 tensor as the convolution reads it: itself, or its 16-bit channels-last copy in role r.
const void* operand(Precision p, MixedRole r, const Tensor& t, cudaStream_t s) {
  return operand_nhwc(p, r, t.data(), t.dim(0), t.dim(1), t.dim(2) * t.dim(3), s);
}
// A 16-bit channels-last result at src back into the [N, C, H, W] fp32 tensor t.
void result_to(Precision p, const void* src, Tensor& t, cudaStream_t s) {
  from_16bit_nhwc(p, src, t.data(), t.dim(0), t.dim(1), t.dim(2) * t.dim(3), s);
}

// The first algorithm of cuDNN's ranking (heuristic, or timed) that succeeded, is deterministic when m asks, runs in a
// math m's precision allows and whose confirmed workspace fits the bound; its math type goes onto the pass's
// descriptor. workspace(algo) asks cuDNN for the size.
template <typename Perf, typename Algo, typename Size>
void pick(const Perf* perf, int count, const char* pass, const Shape& in, const LayerMath& m, Pass<Algo>& out,
          Size workspace) {
  for (int i = 0; i < count; ++i) {
    const Perf& c = perf[i];
    if (c.status != CUDNN_STATUS_SUCCESS || (m.deterministic && c.determinism != CUDNN_DETERMINISTIC) ||
        (m.precision == Precision::Fp32 && c.mathType != CUDNN_DEFAULT_MATH && c.mathType != CUDNN_FMA_MATH))
      continue;
    CHECK_CUDNN(cudnnSetConvolutionMathType(out.conv, c.mathType));
    size_t bytes = 0;
    if (workspace(c.algo, &bytes) != CUDNN_STATUS_SUCCESS) continue;
    bytes = std::max(bytes, c.memory);
    if (bytes > kConvWorkspaceBytes) continue;
    out.algo = c.algo, out.workspace = bytes, out.ready = true;
    return;
  }
  OCTET_THROW("conv: cuDNN offers no " << (m.deterministic ? "deterministic " : "") << precision_name(m.precision)
                                       << " " << pass << " algorithm within " << (kConvWorkspaceBytes >> 20)
                                       << " MB of workspace for input " << shape_str(in));
}

}  // namespace

struct Conv2d::CudaState {
  std::map<Shape, std::unique_ptr<ConvEntry>> entries;
  Tensor bias_parts{Shape{0}, Device::CUDA};  // the bias gradient's partial sums (conv_bias_grad_nhwc_cuda)
  // The 16-bit channels-last copy of the weights (KRSC) that forward makes and backward reads again (the weights
  // change only between steps, in the optimizer), and whether forward made it.
  Tensor w16{Shape{0}, Device::CUDA};
  bool w16_made = false;
  const void* weights16(Precision p, const Tensor& w, cudaStream_t s) {
    const int64_t n = w.numel();
    if (w16.numel() < (n + 1) / 2) w16 = Tensor({(n + 1) / 2}, Device::CUDA);
    to_16bit_nhwc(p, w.data(), w16.raw(), w.dim(0), w.dim(1), w.dim(2) * w.dim(3), s);
    w16_made = true;
    return w16.raw();
  }
  // The entry for input shape in (where the algorithms are timed: on the operands at x, w and y, any contents, y
  // written over; y null: a scratch output).
  ConvEntry& get(const Conv2dParams& p, const LayerMath& m, const Shape& in, const Shape& out, Exec& ex, const void* x,
                 const void* w, void* y);
  // The backward-data algorithm (where timed: on w and dy, read, and dx, written over; dx null: a scratch dx).
  void need_bwd_data(ConvEntry& e, const LayerMath& m, const Shape& in, Exec& ex, const void* w, const void* dy,
                     void* dx);
};

namespace {

// The convolutions' workspace: one for every Conv2d of the process, grown to the largest need of any (each layer kept
// its own before, and their sum grew with the batch; PyTorch's caching allocator hands its convolutions one block the
// same way). Their calls queue on the one compute stream, so none runs while another uses it; a larger one replaces it
// between calls (cudaFree waits for its users). Never destroyed (a static's destructor would free device memory after
// the CUDA runtime is gone).
void* conv_workspace(size_t bytes) {
  static auto* t = new Tensor(Shape{0}, Device::CUDA);
  const int64_t floats = static_cast<int64_t>((bytes + 3) / 4);
  if (floats > t->numel()) *t = Tensor({floats}, Device::CUDA);
  return t->data();
}

// What cudnnFind*Ex times algorithms on beside the layer's own operands (any contents): the workspace bound, and the
// outputs no operand may take (n values in the operands' type each), freed after the search.
struct FindScratch {
  Tensor ws{Shape{static_cast<int64_t>(kConvWorkspaceBytes / 4)}, Device::CUDA};
  std::vector<Tensor> outs;
  Precision p;
  explicit FindScratch(Precision prec) : p(prec) {}
  void* out(int64_t n) {
    outs.emplace_back(Shape{(n * static_cast<int64_t>(operand_bytes(p)) + 3) / 4}, Device::CUDA);
    return outs.back().data();
  }
};

}  // namespace

ConvEntry& Conv2d::CudaState::get(const Conv2dParams& p, const LayerMath& m, const Shape& in, const Shape& out,
                                  Exec& ex, const void* x, const void* w, void* y) {
  Shape key = in;  // (a layer's math is set before its first pass; tests change it)
  key.push_back(static_cast<int64_t>(m.precision) * 2 + (m.deterministic ? 1 : 0));
  auto& slot = entries[key];
  if (slot) return *slot;
  auto e = std::make_unique<ConvEntry>();
  const cudnnDataType_t type = cudnn_type(m.precision);
  e->x = nchw(in, type);
  e->y = nchw(out, type);
  e->y32 = nchw(out);
  if (p.bias) e->b = nchw({1, p.out_channels, 1, 1});
  CHECK_CUDNN(cudnnCreateFilterDescriptor(&e->w));
  const int64_t wnum = p.out_channels * (p.in_channels / p.groups) * p.kernel * p.kernel;
  CHECK_CUDNN(cudnnSetFilter4dDescriptor(e->w, type, is_16bit(m.precision) ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                         static_cast<int>(p.out_channels), static_cast<int>(p.in_channels / p.groups),
                                         static_cast<int>(p.kernel), static_cast<int>(p.kernel)));
  e->fwd.conv = conv_desc(p, m.precision), e->bwd_data.conv = conv_desc(p, m.precision);
  e->bwd_filter.conv = conv_desc(p, m.precision);
  cudnnHandle_t h = cudnn_of(ex);
  int n = 0;
  ConvEntry* ep = e.get();
  std::unique_ptr<FindScratch> fb;
  if (!m.deterministic) {
    fb = std::make_unique<FindScratch>(m.precision);
    if (!y) y = fb->out(shape_numel(out));
  }
  cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  if (fb)
    CHECK_CUDNN(cudnnFindConvolutionForwardAlgorithmEx(h, e->x, x, e->w, w, e->fwd.conv, e->y, y,
                                                       CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, fp, fb->ws.data(),
                                                       kConvWorkspaceBytes));
  else
    CHECK_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(h, e->x, e->w, e->fwd.conv, e->y,
                                                       CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, fp));
  pick(fp, n, "forward", in, m, e->fwd, [&](cudnnConvolutionFwdAlgo_t a, size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, ep->x, ep->w, ep->fwd.conv, ep->y, a, bytes);
  });
  cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  if (fb)
    CHECK_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(  // (y as dy, read; the weights' gradient a scratch)
        h, e->x, x, e->y, y, e->bwd_filter.conv, e->w, fb->out(wnum), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, wp,
        fb->ws.data(), kConvWorkspaceBytes));
  else
    CHECK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, e->x, e->y, e->bwd_filter.conv, e->w,
                                                              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, wp));
  pick(wp, n, "backward-filter", in, m, e->bwd_filter, [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, ep->x, ep->y, ep->bwd_filter.conv, ep->w, a, bytes);
  });
  slot = std::move(e);
  return *slot;
}

void Conv2d::CudaState::need_bwd_data(ConvEntry& e, const LayerMath& m, const Shape& in, Exec& ex, const void* w,
                                      const void* dy, void* dx) {
  if (e.bwd_data.ready) return;
  cudnnHandle_t h = cudnn_of(ex);
  int n = 0;
  cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  if (!m.deterministic) {
    FindScratch fb(m.precision);
    if (!dx) dx = fb.out(shape_numel(in));
    CHECK_CUDNN(cudnnFindConvolutionBackwardDataAlgorithmEx(h, e.w, w, e.y, dy, e.bwd_data.conv, e.x, dx,
                                                            CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, dp, fb.ws.data(),
                                                            kConvWorkspaceBytes));
  } else {
    CHECK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, e.w, e.y, e.bwd_data.conv, e.x,
                                                            CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, dp));
  }
  pick(dp, n, "backward-data", in, m, e.bwd_data, [&](cudnnConvolutionBwdDataAlgo_t a, size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, e.w, e.y, e.bwd_data.conv, e.x, a, bytes);
  });
}

bool Conv2d::has_cuda() const { return true; }

// bf16 and fp16: the operands' 16-bit channels-last copies in the shared scratch (layers/mixed_cuda.cuh), the result
// cast back to NCHW fp32; or a 16-bit model's channels-last activations (Model::set_layout) read and written as they
// are.
void Conv2d::forward_cuda(const Tensor& x, Tensor& y, const StepContext&) {
  if (!cuda_) cuda_ = std::make_shared<CudaState>();
  const LayerMath& m = math();
  const Precision p = m.precision;
  ConvEntry& e = cuda_->get(p_, m, x.shape(), y.shape(), exec(), x.raw(), w_.data(), y.raw());  // (y: written next)
  const float one = 1.f, zero = 0.f;
  cudnnHandle_t h = cudnn_of(exec());
  const cudaStream_t s = cuda_stream(exec().compute());
  const DType a16 = activation_type(p);  // channels-last 16-bit activations, in the convolution's own type
  const bool xh = x.dtype() != DType::F32, yh = y.dtype() != DType::F32;
  OCTET_CHECK(!(xh || yh) || (is_16bit(p) && (!xh || x.dtype() == a16) && (!yh || y.dtype() == a16)),
              op("forward") << ": " << dtype_name(xh ? x.dtype() : y.dtype()) << " activations in a "
                            << precision_name(p) << " convolution");
  const void* xo = xh ? x.raw() : operand(p, MixedRole::X, x, s);
  const void* wo = is_16bit(p) ? cuda_->weights16(p, w_, s) : w_.data();
  void* yo = yh ? y.raw() : is_16bit(p) ? mixed_scratch(MixedRole::Y, static_cast<size_t>(y.numel()) * 2) : y.data();
  CHECK_CUDNN(cudnnConvolutionForward(h, &one, e.x, xo, e.w, wo, e.fwd.conv, e.fwd.algo,
                                      conv_workspace(e.fwd.workspace), e.fwd.workspace, &zero, e.y, yo));
  if (!yh && is_16bit(p)) result_to(p, yo, y, s);
  conv_bias_act_cuda(y, p_.bias ? b_.data() : nullptr, relu_, exec().compute());  // (nothing without either)
}

void Conv2d::backward_cuda(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  if (!cuda_) cuda_ = std::make_shared<CudaState>();
  const LayerMath& m = math();
  const Precision p = m.precision;
  ConvEntry& e = cuda_->get(p_, m, x.shape(), y.shape(), exec(), x.raw(), w_.data(), nullptr);
  const float one = 1.f, zero = 0.f;
  cudnnHandle_t h = cudnn_of(exec());
  const cudaStream_t s = cuda_stream(exec().compute());
  const DType a16 = activation_type(p);
  const bool xh = x.dtype() != DType::F32, dyh = dy.dtype() != DType::F32, dxh = dx && dx->dtype() != DType::F32;
  OCTET_CHECK(!(xh || dyh || dxh) || (is_16bit(p) && (!xh || x.dtype() == a16) && (!dyh || dy.dtype() == a16) &&
                                      (!dxh || dx->dtype() == a16)),
              op("backward") << ": 16-bit activations in a " << precision_name(p) << " convolution");
  const Tensor* g = &dy;  // a fused ReLU: dy masked by the output once, for every gradient
  if (relu_) {
    if (masked_.device() != Device::CUDA || masked_.dtype() != dy.dtype())
      masked_ = Tensor(Shape{0}, Device::CUDA, dy.dtype());
    masked_.resize(dy.shape());
    if (!dyh) relu_mask_cuda(y.data(), dy.data(), masked_.data(), dy.numel(), exec().compute());
    g = &masked_;
  }
  // 16-bit channels-last: the mask and the bias gradient in one pass (an fp32 dy's bias gradient is cuDNN's, below).
  if (dyh && (relu_ || p_.bias))
    conv_bias_grad_nhwc_cuda(y, dy, relu_ ? &masked_ : nullptr, p_.bias ? db_.data() : nullptr, cuda_->bias_parts,
                             relu_, exec().compute());
  const void* xo = xh ? x.raw() : operand(p, MixedRole::X, x, s);
  const void* dyo = dyh ? g->raw() : operand(p, MixedRole::Dy, *g, s);
  void* dwo = is_16bit(p) ? mixed_scratch(MixedRole::Dw, static_cast<size_t>(dw_.numel()) * 2) : dw_.data();
  CHECK_CUDNN(cudnnConvolutionBackwardFilter(h, &one, e.x, xo, e.y, dyo, e.bwd_filter.conv, e.bwd_filter.algo,
                                             conv_workspace(e.bwd_filter.workspace), e.bwd_filter.workspace, &zero, e.w,
                                             dwo));
  if (is_16bit(p)) result_to(p, dwo, dw_, s);
  if (p_.bias && !dyh)
    CHECK_CUDNN(cudnnConvolutionBackwardBias(h, &one, e.y32, g->data(), &zero, e.b, db_.data()));  // (fp32)
  if (dx) {
    // (dx is written over next, unless the gradient is added to what it holds)
    cuda_->need_bwd_data(e, m, x.shape(), exec(), w_.data(), dyo, accumulate_dx_ ? nullptr : dx->raw());
    const void* wo = !is_16bit(p) ? w_.data() : cuda_->w16_made ? cuda_->w16.raw() : cuda_->weights16(p, w_, s);
    void* dxo = dxh           ? dx->raw()
                : is_16bit(p) ? mixed_scratch(MixedRole::Dx, static_cast<size_t>(dx->numel()) * 2)
                              : dx->data();
    // accumulate_input_grad: added to what dx holds (beta = 1), where cuDNN writes dx itself (accumulates_input_grad).
    OCTET_CHECK(!accumulate_dx_ || dxh || !is_16bit(p), op("backward") << ": asked to accumulate a cast gradient");
    CHECK_CUDNN(cudnnConvolutionBackwardData(h, &one, e.w, wo, e.y, dyo, e.bwd_data.conv, e.bwd_data.algo,
                                             conv_workspace(e.bwd_data.workspace), e.bwd_data.workspace,
                                             accumulate_dx_ ? &one : &zero, e.x, dxo));
    if (is_16bit(p) && !dxh) result_to(p, dxo, *dx, s);
  }
}

}  // namespace octet
