// FullyConnected on cuBLAS: y = x W^T (+ b) as one SGEMM in cuBLAS's column-major view of the row-major tensors,
// its two backward GEMMs, and the bias and its gradient as small kernels (the bias gradient sums samples in order,
// so it repeats bit for bit).
#include "core/cuda_util.cuh"
#include "layers/fc.h"

namespace octet {

namespace {

__global__ void add_bias(float* __restrict__ y, const float* __restrict__ b, int64_t n, int64_t out) {
  OCTET_GRID_STRIDE(i, n * out) { y[i] += b[i % out]; }
}

__global__ void bias_grad(float* __restrict__ db, const float* __restrict__ dy, int64_t n, int64_t out) {
  OCTET_GRID_STRIDE(o, out) {
    float s = 0.f;
    for (int64_t i = 0; i < n; ++i) s += dy[i * out + o];
    db[o] = s;
  }
}

}  // namespace

bool FullyConnected::has_cuda() const { return true; }

// Row-major x [N,IN], W [OUT,IN], y [N,OUT] are, column-major, X = x^T (IN x N), Wc = W^T (IN x OUT), Y = y^T (OUT x
// N).
void FullyConnected::forward_cuda(const Tensor& x, Tensor& y, const StepContext&) {
  const int n = static_cast<int>(x.dim(0)), in = static_cast<int>(p_.in_features),
            out = static_cast<int>(p_.out_features);
  const float one = 1.f, zero = 0.f;
  // Y = Wc^T X
  CHECK_CUBLAS(cublas_api().sgemm(cublas_of(exec()), CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &one, w_.data(), in,
                                  x.data(), in, &zero, y.data(), out));
  if (p_.bias) {
    add_bias<<<grid_for(int64_t{n} * out), 256, 0, cuda_stream(exec().compute())>>>(y.data(), b_.data(), n, out);
    CHECK_LAUNCH("add_bias");
  }
}

void FullyConnected::backward_cuda(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  const int n = static_cast<int>(x.dim(0)), in = static_cast<int>(p_.in_features),
            out = static_cast<int>(p_.out_features);
  const float one = 1.f, zero = 0.f;
  cublasHandle_t h = cublas_of(exec());
  // dWc (IN x OUT) = X dY^T
  CHECK_CUBLAS(cublas_api().sgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, &one, x.data(), in, dy.data(), out, &zero,
                                  dw_.data(), in));
  if (p_.bias) {
    bias_grad<<<grid_for(out), 256, 0, cuda_stream(exec().compute())>>>(db_.data(), dy.data(), n, out);
    CHECK_LAUNCH("bias_grad");
  }
  // dX (IN x N) = Wc dY
  if (dx)
    CHECK_CUBLAS(cublas_api().sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, &one, w_.data(), in, dy.data(), out, &zero,
                                    dx->data(), in));
}

}  // namespace octet
