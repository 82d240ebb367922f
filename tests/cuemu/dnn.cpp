// The CUDA emulator's cuDNN and cuBLAS (the calls octet makes): descriptors as cuDNN keeps them, and convolutions,
// bias sums and GEMMs as plain loops that read fp32, bf16 or fp16 operands through their descriptors' strides and
// layouts, sum in fp32 (in a fixed order) and round once as they store, with cuDNN's alpha and beta. Each algorithm
// query offers one deterministic algorithm, whose workspace (4 bytes a value of the pass's output) each pass writes
// over in full, so a workspace octet sizes short faults on the guarded memory; a timed search (cudnnFind*Ex) writes its
// output buffer over in full and reads its inputs' last bytes, as the real one runs the algorithms on them.
#include <cublas_v2.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "core/bf16.h"
#include "tests/cuemu/internal.h"

namespace {

using Lock = std::lock_guard<std::recursive_mutex>;

struct TensorDesc {
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int n = 0, c = 0, h = 0, w = 0;
  int sn = 0, sc = 0, sh = 0, sw = 0;
  int64_t at(int a, int b, int y, int x) const {
    return int64_t{a} * sn + int64_t{b} * sc + int64_t{y} * sh + int64_t{x} * sw;
  }
};
struct FilterDesc {
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  int k = 0, c = 0, r = 0, s = 0;
  int64_t at(int ko, int ci, int y, int x) const {  // KCRS, or KRSC for NHWC
    return format == CUDNN_TENSOR_NHWC ? ((int64_t{ko} * r + y) * s + x) * c + ci
                                       : ((int64_t{ko} * c + ci) * r + y) * s + x;
  }
};
struct ConvDesc {
  int pad_h = 0, pad_w = 0, u = 1, v = 1, dil_h = 1, dil_w = 1, groups = 1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

float get(cudnnDataType_t t, const void* p, int64_t i) {
  switch (t) {
    case CUDNN_DATA_BFLOAT16:
      return octet::bf16_to_float(static_cast<const octet::bf16_t*>(p)[i]);
    case CUDNN_DATA_HALF:
      return octet::fp16_to_float(static_cast<const octet::fp16_t*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}
void put(cudnnDataType_t t, void* p, int64_t i, float v) {
  switch (t) {
    case CUDNN_DATA_BFLOAT16:
      static_cast<octet::bf16_t*>(p)[i] = octet::float_to_bf16(v);
      break;
    case CUDNN_DATA_HALF:
      static_cast<octet::fp16_t*>(p)[i] = octet::float_to_fp16(v);
      break;
    default:
      static_cast<float*>(p)[i] = v;
  }
}
// out = alpha * sum + beta * out (beta 0: out is not read, as cuDNN and cuBLAS promise)
void blend(cudnnDataType_t t, void* p, int64_t i, float sum, float alpha, float beta) {
  put(t, p, i, beta == 0.f ? alpha * sum : alpha * sum + beta * get(t, p, i));
}

size_t type_bytes(cudnnDataType_t t) { return t == CUDNN_DATA_FLOAT ? 4 : 2; }
size_t values(const TensorDesc& t) { return size_t(t.n) * t.c * t.h * t.w; }
size_t values(const FilterDesc& f) { return size_t(f.k) * f.c * f.r * f.s; }
// A pass's workspace: 4 bytes a value of its output.
template <class D>
size_t need(const void* out_desc) {
  return 4 * values(*reinterpret_cast<const D*>(out_desc));
}
// A pass given ws (bytes) that it needs: fails as cuDNN does when short, else writes it over.
bool use_workspace(void* ws, size_t bytes, size_t needed) {
  if (bytes < needed || (needed && !ws)) return false;
  if (needed) std::memset(ws, 0xa5, needed);
  return true;
}
// A timed search's operands: the inputs' last bytes read, the output written over in full (its bytes by descriptor).
void search_on(std::initializer_list<std::pair<const void*, size_t>> in, void* out, size_t out_bytes) {
  for (const auto& [p, n] : in) {
    volatile const unsigned char* b = static_cast<const unsigned char*>(p);
    if (n) (void)b[n - 1];
  }
  std::memset(out, 0x5a, out_bytes);
}

bool supported(cudnnDataType_t t) { return t == CUDNN_DATA_FLOAT || t == CUDNN_DATA_BFLOAT16 || t == CUDNN_DATA_HALF; }

template <class Perf, class Algo>
void offer(const ConvDesc& c, int* returned, Perf* perf, int requested) {
  *returned = requested > 0 ? 1 : 0;
  if (!requested) return;
  perf[0] = Perf{};
  perf[0].algo = static_cast<Algo>(0);
  perf[0].status = CUDNN_STATUS_SUCCESS;
  perf[0].time = 0.f;
  perf[0].memory = 0;
  perf[0].determinism = CUDNN_DETERMINISTIC;
  perf[0].mathType = c.math;
}

}  // namespace

// The convolutions read their operands as dense fp32 copies ([N, C, H, W] and [K, C, R, S]), loop with the output
// row innermost, and store through the descriptors.
namespace {
struct Conv {
  const TensorDesc &X, &Y;
  const FilterDesc& W;
  const ConvDesc& C;
  int kg;            // output channels a group
  bool ok() const {  // (cuDNN's BAD_PARAM: the channels, the output's size, one data type)
    const auto out = [](int in, int pad, int dil, int k, int stride) {
      return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
    };
    return W.c * C.groups == X.c && W.k == Y.c && W.k % C.groups == 0 && X.n == Y.n &&
           Y.h == out(X.h, C.pad_h, C.dil_h, W.r, C.u) && Y.w == out(X.w, C.pad_w, C.dil_w, W.s, C.v) &&
           X.type == Y.type && X.type == W.type;
  }
  std::vector<float> dense(const TensorDesc& d, const void* p) const {
    std::vector<float> v(static_cast<size_t>(d.n) * d.c * d.h * d.w);
    size_t i = 0;
    for (int n = 0; n < d.n; ++n)
      for (int c = 0; c < d.c; ++c)
        for (int y = 0; y < d.h; ++y)
          for (int x = 0; x < d.w; ++x) v[i++] = get(d.type, p, d.at(n, c, y, x));
    return v;
  }
  std::vector<float> dense_w(const void* p) const {
    std::vector<float> v(static_cast<size_t>(W.k) * W.c * W.r * W.s);
    size_t i = 0;
    for (int k = 0; k < W.k; ++k)
      for (int c = 0; c < W.c; ++c)
        for (int r = 0; r < W.r; ++r)
          for (int s = 0; s < W.s; ++s) v[i++] = get(W.type, p, W.at(k, c, r, s));
    return v;
  }
  void store(const TensorDesc& d, void* p, const std::vector<float>& v, float a, float b) const {
    size_t i = 0;
    for (int n = 0; n < d.n; ++n)
      for (int c = 0; c < d.c; ++c)
        for (int y = 0; y < d.h; ++y)
          for (int x = 0; x < d.w; ++x) blend(d.type, p, d.at(n, c, y, x), v[i++], a, b);
  }
  // f(xrow, yrow, lo, hi): for every output row (n, k, oy) whose input row (channel c, filter row r) lies inside x, the
  // dense indices of x[.., iy, 0] shifted by filter column s and of y[.., oy, 0], and the output columns [lo, hi)
  // whose input column ox * v + (s * dil - pad) lies inside it.
  template <class F>
  void rows(int n, int k, int c, int r, int s, F f) const {
    const int ci = k / kg * W.c + c, shift = s * C.dil_w - C.pad_w;
    int lo = 0, hi = Y.w;
    while (lo < hi && lo * C.v + shift < 0) ++lo;
    while (hi > lo && (hi - 1) * C.v + shift >= X.w) --hi;
    const size_t xp = (static_cast<size_t>(n) * X.c + ci) * X.h * X.w,
                 yp = (static_cast<size_t>(n) * Y.c + k) * Y.h * Y.w;
    for (int oy = 0; oy < Y.h; ++oy) {
      const int iy = oy * C.u - C.pad_h + r * C.dil_h;
      if (iy < 0 || iy >= X.h || lo >= hi) continue;
      f(static_cast<ptrdiff_t>(xp + static_cast<size_t>(iy) * X.w) + shift, yp + static_cast<size_t>(oy) * Y.w, lo, hi);
    }
  }
};
Conv conv_of(cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t c,
             cudnnTensorDescriptor_t y) {
  const auto& W = *reinterpret_cast<const FilterDesc*>(w);
  const auto& C = *reinterpret_cast<const ConvDesc*>(c);
  return {*reinterpret_cast<const TensorDesc*>(x), *reinterpret_cast<const TensorDesc*>(y), W, C,
          C.groups > 0 ? W.k / C.groups : 1};
}
}  // namespace

extern "C" {

size_t cudnnGetVersion() { return CUDNN_VERSION; }
const char* cudnnGetErrorString(cudnnStatus_t s) {
  return s == CUDNN_STATUS_SUCCESS ? "CUDNN_STATUS_SUCCESS" : "CUDNN_STATUS_(emulated failure)";
}
cudnnStatus_t cudnnCreate(cudnnHandle_t* h) {
  *h = reinterpret_cast<cudnnHandle_t>(new int(0));
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetStream(cudnnHandle_t, cudaStream_t) { return CUDNN_STATUS_SUCCESS; }

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* d) {
  *d = reinterpret_cast<cudnnTensorDescriptor_t>(new TensorDesc);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) {
  delete reinterpret_cast<TensorDesc*>(d);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t f, cudnnDataType_t t, int n,
                                         int c, int h, int w) {
  if (!supported(t) || n <= 0 || c <= 0 || h <= 0 || w <= 0 || (f != CUDNN_TENSOR_NCHW && f != CUDNN_TENSOR_NHWC))
    return CUDNN_STATUS_BAD_PARAM;
  auto& x = *reinterpret_cast<TensorDesc*>(d);
  x = {t, n, c, h, w, c * h * w, h * w, w, 1};
  if (f == CUDNN_TENSOR_NHWC) x.sc = 1, x.sw = c, x.sh = w * c;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetTensor4dDescriptor(const cudnnTensorDescriptor_t d, cudnnDataType_t* t, int* n, int* c, int* h,
                                         int* w, int* sn, int* sc, int* sh, int* sw) {
  const auto& x = *reinterpret_cast<const TensorDesc*>(d);
  *t = x.type, *n = x.n, *c = x.c, *h = x.h, *w = x.w, *sn = x.sn, *sc = x.sc, *sh = x.sh, *sw = x.sw;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* d) {
  *d = reinterpret_cast<cudnnFilterDescriptor_t>(new FilterDesc);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) {
  delete reinterpret_cast<FilterDesc*>(d);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t, cudnnTensorFormat_t f, int k,
                                         int c, int r, int s) {
  if (!supported(t) || k <= 0 || c <= 0 || r <= 0 || s <= 0) return CUDNN_STATUS_BAD_PARAM;
  *reinterpret_cast<FilterDesc*>(d) = {t, f, k, c, r, s};
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetFilter4dDescriptor(const cudnnFilterDescriptor_t d, cudnnDataType_t* t, cudnnTensorFormat_t* f,
                                         int* k, int* c, int* r, int* s) {
  const auto& w = *reinterpret_cast<const FilterDesc*>(d);
  *t = w.type, *f = w.format, *k = w.k, *c = w.c, *r = w.r, *s = w.s;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* d) {
  *d = reinterpret_cast<cudnnConvolutionDescriptor_t>(new ConvDesc);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) {
  delete reinterpret_cast<ConvDesc*>(d);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int ph, int pw, int u, int v, int dh,
                                              int dw, cudnnConvolutionMode_t mode, cudnnDataType_t) {
  if (mode != CUDNN_CROSS_CORRELATION || u <= 0 || v <= 0 || dh <= 0 || dw <= 0 || ph < 0 || pw < 0)
    return CUDNN_STATUS_NOT_SUPPORTED;
  auto& c = *reinterpret_cast<ConvDesc*>(d);
  c.pad_h = ph, c.pad_w = pw, c.u = u, c.v = v, c.dil_h = dh, c.dil_w = dw;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int g) {
  if (g <= 0) return CUDNN_STATUS_BAD_PARAM;
  reinterpret_cast<ConvDesc*>(d)->groups = g;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m) {
  reinterpret_cast<ConvDesc*>(d)->math = m;
  return CUDNN_STATUS_SUCCESS;
}

#define CUEMU_OFFER(Perf, Algo) offer<Perf, Algo>(*reinterpret_cast<const ConvDesc*>(c), returned, perf, requested)
cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t, const cudnnTensorDescriptor_t,
                                                     const cudnnFilterDescriptor_t,
                                                     const cudnnConvolutionDescriptor_t c,
                                                     const cudnnTensorDescriptor_t, const int requested, int* returned,
                                                     cudnnConvolutionFwdAlgoPerf_t* perf) {
  CUEMU_OFFER(cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(cudnnHandle_t, const cudnnTensorDescriptor_t xd, const void* x,
                                                     const cudnnFilterDescriptor_t wd, const void* w,
                                                     const cudnnConvolutionDescriptor_t c,
                                                     const cudnnTensorDescriptor_t yd, void* y, const int requested,
                                                     int* returned, cudnnConvolutionFwdAlgoPerf_t* perf, void*,
                                                     size_t) {
  Lock l(cuemu::device_lock());
  const auto &X = *reinterpret_cast<const TensorDesc*>(xd), &Y = *reinterpret_cast<const TensorDesc*>(yd);
  const auto& W = *reinterpret_cast<const FilterDesc*>(wd);
  search_on({{x, values(X) * type_bytes(X.type)}, {w, values(W) * type_bytes(W.type)}}, y,
            values(Y) * type_bytes(Y.type));
  CUEMU_OFFER(cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t, const cudnnFilterDescriptor_t,
                                                          const cudnnTensorDescriptor_t,
                                                          const cudnnConvolutionDescriptor_t c,
                                                          const cudnnTensorDescriptor_t, const int requested,
                                                          int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
  CUEMU_OFFER(cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(cudnnHandle_t, const cudnnFilterDescriptor_t wd,
                                                          const void* w, const cudnnTensorDescriptor_t dyd,
                                                          const void* dy, const cudnnConvolutionDescriptor_t c,
                                                          const cudnnTensorDescriptor_t dxd, void* dx,
                                                          const int requested, int* returned,
                                                          cudnnConvolutionBwdDataAlgoPerf_t* perf, void*, size_t) {
  Lock l(cuemu::device_lock());
  const auto &Y = *reinterpret_cast<const TensorDesc*>(dyd), &X = *reinterpret_cast<const TensorDesc*>(dxd);
  const auto& W = *reinterpret_cast<const FilterDesc*>(wd);
  search_on({{w, values(W) * type_bytes(W.type)}, {dy, values(Y) * type_bytes(Y.type)}}, dx,
            values(X) * type_bytes(X.type));
  CUEMU_OFFER(cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t, const cudnnTensorDescriptor_t,
                                                            const cudnnTensorDescriptor_t,
                                                            const cudnnConvolutionDescriptor_t c,
                                                            const cudnnFilterDescriptor_t, const int requested,
                                                            int* returned, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
  CUEMU_OFFER(cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(cudnnHandle_t, const cudnnTensorDescriptor_t xd,
                                                            const void* x, const cudnnTensorDescriptor_t dyd,
                                                            const void* dy, const cudnnConvolutionDescriptor_t c,
                                                            const cudnnFilterDescriptor_t dwd, void* dw,
                                                            const int requested, int* returned,
                                                            cudnnConvolutionBwdFilterAlgoPerf_t* perf, void*, size_t) {
  Lock l(cuemu::device_lock());
  const auto &X = *reinterpret_cast<const TensorDesc*>(xd), &Y = *reinterpret_cast<const TensorDesc*>(dyd);
  const auto& W = *reinterpret_cast<const FilterDesc*>(dwd);
  search_on({{x, values(X) * type_bytes(X.type)}, {dy, values(Y) * type_bytes(Y.type)}}, dw,
            values(W) * type_bytes(W.type));
  CUEMU_OFFER(cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t);
  return CUDNN_STATUS_SUCCESS;
}
#undef CUEMU_OFFER
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t, const cudnnTensorDescriptor_t,
                                                      const cudnnFilterDescriptor_t, const cudnnConvolutionDescriptor_t,
                                                      const cudnnTensorDescriptor_t yd, cudnnConvolutionFwdAlgo_t,
                                                      size_t* bytes) {
  *bytes = need<TensorDesc>(yd);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t, const cudnnFilterDescriptor_t,
                                                           const cudnnTensorDescriptor_t,
                                                           const cudnnConvolutionDescriptor_t,
                                                           const cudnnTensorDescriptor_t dxd,
                                                           cudnnConvolutionBwdDataAlgo_t, size_t* bytes) {
  *bytes = need<TensorDesc>(dxd);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t, const cudnnTensorDescriptor_t,
                                                             const cudnnTensorDescriptor_t,
                                                             const cudnnConvolutionDescriptor_t,
                                                             const cudnnFilterDescriptor_t dwd,
                                                             cudnnConvolutionBwdFilterAlgo_t, size_t* bytes) {
  *bytes = need<FilterDesc>(dwd);
  return CUDNN_STATUS_SUCCESS;
}

// y[n, k, oy, ox] = sum over the group's channels c and taps (r, s) of x[n, g*C + c, y, x] * w[k, c, r, s]
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t, const void* alpha, const cudnnTensorDescriptor_t xd, const void* x,
                                      const cudnnFilterDescriptor_t wd, const void* w,
                                      const cudnnConvolutionDescriptor_t cd, cudnnConvolutionFwdAlgo_t, void* wsp,
                                      size_t wsb, const void* beta, const cudnnTensorDescriptor_t yd, void* y) {
  Lock l(cuemu::device_lock());
  const Conv cv = conv_of(xd, wd, cd, yd);
  if (!cv.ok() || !use_workspace(wsp, wsb, need<TensorDesc>(yd))) return CUDNN_STATUS_BAD_PARAM;
  const std::vector<float> xs = cv.dense(cv.X, x), ws = cv.dense_w(w);
  std::vector<float> ys(static_cast<size_t>(cv.Y.n) * cv.Y.c * cv.Y.h * cv.Y.w, 0.f);
  size_t wi = 0;
  for (int k = 0; k < cv.W.k; ++k)
    for (int c = 0; c < cv.W.c; ++c)
      for (int r = 0; r < cv.W.r; ++r)
        for (int s = 0; s < cv.W.s; ++s, ++wi)
          for (int n = 0; n < cv.Y.n; ++n)
            cv.rows(n, k, c, r, s, [&, v = cv.C.v, wv = ws[wi]](ptrdiff_t xr, size_t yr, int lo, int hi) {
              for (int ox = lo; ox < hi; ++ox) ys[yr + ox] += xs[xr + ox * v] * wv;
            });
  cv.store(cv.Y, y, ys, *static_cast<const float*>(alpha), *static_cast<const float*>(beta));
  return CUDNN_STATUS_SUCCESS;
}

// dx[n, g*C + c, y, x] = sum over the outputs (k, oy, ox) that read it of dy * w
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t, const void* alpha, const cudnnFilterDescriptor_t wd,
                                           const void* w, const cudnnTensorDescriptor_t dyd, const void* dy,
                                           const cudnnConvolutionDescriptor_t cd, cudnnConvolutionBwdDataAlgo_t,
                                           void* wsp, size_t wsb, const void* beta, const cudnnTensorDescriptor_t dxd,
                                           void* dx) {
  Lock l(cuemu::device_lock());
  const Conv cv = conv_of(dxd, wd, cd, dyd);
  if (!cv.ok() || !use_workspace(wsp, wsb, need<TensorDesc>(dxd))) return CUDNN_STATUS_BAD_PARAM;
  const std::vector<float> ys = cv.dense(cv.Y, dy), ws = cv.dense_w(w);
  std::vector<float> xs(static_cast<size_t>(cv.X.n) * cv.X.c * cv.X.h * cv.X.w, 0.f);
  size_t wi = 0;
  for (int k = 0; k < cv.W.k; ++k)
    for (int c = 0; c < cv.W.c; ++c)
      for (int r = 0; r < cv.W.r; ++r)
        for (int s = 0; s < cv.W.s; ++s, ++wi)
          for (int n = 0; n < cv.Y.n; ++n)
            cv.rows(n, k, c, r, s, [&, v = cv.C.v, wv = ws[wi]](ptrdiff_t xr, size_t yr, int lo, int hi) {
              for (int ox = lo; ox < hi; ++ox) xs[xr + ox * v] += ys[yr + ox] * wv;
            });
  cv.store(cv.X, dx, xs, *static_cast<const float*>(alpha), *static_cast<const float*>(beta));
  return CUDNN_STATUS_SUCCESS;
}

// dw[k, c, r, s] = sum over (n, oy, ox) of x * dy
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t, const void* alpha, const cudnnTensorDescriptor_t xd,
                                             const void* x, const cudnnTensorDescriptor_t dyd, const void* dy,
                                             const cudnnConvolutionDescriptor_t cd, cudnnConvolutionBwdFilterAlgo_t,
                                             void* wsp, size_t wsb, const void* beta, const cudnnFilterDescriptor_t dwd,
                                             void* dw) {
  Lock l(cuemu::device_lock());
  const Conv cv = conv_of(xd, dwd, cd, dyd);
  if (!cv.ok() || !use_workspace(wsp, wsb, need<FilterDesc>(dwd))) return CUDNN_STATUS_BAD_PARAM;
  const std::vector<float> xs = cv.dense(cv.X, x), ys = cv.dense(cv.Y, dy);
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  for (int k = 0; k < cv.W.k; ++k)
    for (int c = 0; c < cv.W.c; ++c)
      for (int r = 0; r < cv.W.r; ++r)
        for (int s = 0; s < cv.W.s; ++s) {
          float sum = 0.f;
          for (int n = 0; n < cv.Y.n; ++n)
            cv.rows(n, k, c, r, s, [&, v = cv.C.v](ptrdiff_t xr, size_t yr, int lo, int hi) {
              for (int ox = lo; ox < hi; ++ox) sum += xs[xr + ox * v] * ys[yr + ox];
            });
          blend(cv.W.type, dw, cv.W.at(k, c, r, s), sum, a, b);
        }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t, const void* alpha, const cudnnTensorDescriptor_t dyd,
                                           const void* dy, const void* beta, const cudnnTensorDescriptor_t dbd,
                                           void* db) {
  Lock l(cuemu::device_lock());
  const auto &Y = *reinterpret_cast<const TensorDesc*>(dyd), &B = *reinterpret_cast<const TensorDesc*>(dbd);
  if (B.c != Y.c || B.n != 1 || B.h != 1 || B.w != 1) return CUDNN_STATUS_BAD_PARAM;
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  for (int c = 0; c < Y.c; ++c) {
    float sum = 0.f;
    for (int n = 0; n < Y.n; ++n)
      for (int y = 0; y < Y.h; ++y)
        for (int x = 0; x < Y.w; ++x) sum += get(Y.type, dy, Y.at(n, c, y, x));
    blend(B.type, db, B.at(0, c, 0, 0), sum, a, b);
  }
  return CUDNN_STATUS_SUCCESS;
}

// c = alpha * a + beta * c, a broadcast over the dimensions where it has extent 1
cudnnStatus_t cudnnAddTensor(cudnnHandle_t, const void* alpha, const cudnnTensorDescriptor_t ad, const void* A,
                             const void* beta, const cudnnTensorDescriptor_t cd, void* Cp) {
  Lock l(cuemu::device_lock());
  const auto &a = *reinterpret_cast<const TensorDesc*>(ad), &c = *reinterpret_cast<const TensorDesc*>(cd);
  if ((a.n != 1 && a.n != c.n) || (a.c != 1 && a.c != c.c) || (a.h != 1 && a.h != c.h) || (a.w != 1 && a.w != c.w))
    return CUDNN_STATUS_BAD_PARAM;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  for (int n = 0; n < c.n; ++n)
    for (int ch = 0; ch < c.c; ++ch)
      for (int y = 0; y < c.h; ++y)
        for (int x = 0; x < c.w; ++x) {
          const float v = get(a.type, A, a.at(a.n == 1 ? 0 : n, a.c == 1 ? 0 : ch, a.h == 1 ? 0 : y, a.w == 1 ? 0 : x));
          blend(c.type, Cp, c.at(n, ch, y, x), v, al, be);
        }
  return CUDNN_STATUS_SUCCESS;
}

// cuBLAS (column-major): C[m x n] = alpha * op(A)[m x k] op(B)[k x n] + beta * C.
cublasStatus_t cublasCreate_v2(cublasHandle_t* h) {
  *h = reinterpret_cast<cublasHandle_t>(new int(0));
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
  delete reinterpret_cast<int*>(h);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
const char* cublasGetStatusString(cublasStatus_t s) {
  return s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_(emulated failure)";
}

static cudnnDataType_t as_dnn(cudaDataType t, bool* ok) {
  *ok = true;
  switch (t) {
    case CUDA_R_32F:
      return CUDNN_DATA_FLOAT;
    case CUDA_R_16BF:
      return CUDNN_DATA_BFLOAT16;
    case CUDA_R_16F:
      return CUDNN_DATA_HALF;
    default:
      *ok = false;
      return CUDNN_DATA_FLOAT;
  }
}

cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void* alpha, const void* A, cudaDataType at, int lda, const void* B, cudaDataType bt,
                            int ldb, const void* beta, void* C, cudaDataType ct, int ldc, cublasComputeType_t,
                            cublasGemmAlgo_t) {
  Lock l(cuemu::device_lock());
  bool oa, ob, oc;
  const cudnnDataType_t ta_ = as_dnn(at, &oa), tb_ = as_dnn(bt, &ob), tc_ = as_dnn(ct, &oc);
  if (!oa || !ob || !oc || m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  // op(A) as [m][k] and op(B) as [k][n], dense and row-major; each C[i][j] sums over p in order.
  std::vector<float> A_(static_cast<size_t>(m) * k), B_(static_cast<size_t>(k) * n), C_(static_cast<size_t>(n));
  for (int i = 0; i < m; ++i)
    for (int p = 0; p < k; ++p)
      A_[static_cast<size_t>(i) * k + p] = get(ta_, A, ta == CUBLAS_OP_N ? i + int64_t{p} * lda : p + int64_t{i} * lda);
  for (int p = 0; p < k; ++p)
    for (int j = 0; j < n; ++j)
      B_[static_cast<size_t>(p) * n + j] = get(tb_, B, tb == CUBLAS_OP_N ? p + int64_t{j} * ldb : j + int64_t{p} * ldb);
  for (int i = 0; i < m; ++i) {
    std::fill(C_.begin(), C_.end(), 0.f);
    for (int p = 0; p < k; ++p) {
      const float av = A_[static_cast<size_t>(i) * k + p];
      const float* br = &B_[static_cast<size_t>(p) * n];
      for (int j = 0; j < n; ++j) C_[j] += av * br[j];
    }
    for (int j = 0; j < n; ++j) blend(tc_, C, i + int64_t{j} * ldc, C_[j], a, b);
  }
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float* alpha, const float* A, int lda, const float* B, int ldb, const float* beta,
                              float* C, int ldc) {
  return cublasGemmEx(h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, beta, C, CUDA_R_32F, ldc,
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

}  // extern "C"
