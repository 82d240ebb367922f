// FullyConnected on cuBLAS: y = x W^T (+ b) as one GEMM in cuBLAS's column-major view of the row-major tensors,
// its two backward GEMMs, and the bias and its gradient as small kernels (the bias gradient sums samples in order,
// so it repeats bit for bit). fp32 runs SGEMM; tf32 GemmEx with fp32 operands on tensor cores; bf16 and fp16 GemmEx on
// 16-bit copies of the operands (layers/mixed_cuda.cuh), accumulating and writing fp32.
#include "core/cuda_util.cuh"
#include "layers/fc.h"
#include "layers/mixed_cuda.cuh"

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

// C (m x n, fp32) = op(A) op(B) in precision p; A and B fp32 or (16-bit p) 16-bit copies (operand_of).
void gemm(cublasHandle_t h, Precision p, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* a,
          int lda, const void* b, int ldb, float* c, int ldc) {
  const float one = 1.f, zero = 0.f;
  if (p == Precision::Fp32) {
    CHECK_CUBLAS(cublas_api().sgemm(h, ta, tb, m, n, k, &one, static_cast<const float*>(a), lda,
                                    static_cast<const float*>(b), ldb, &zero, c, ldc));
    return;
  }
  const cublasComputeType_t compute = p == Precision::Tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  CHECK_CUBLAS(cublas_api().gemm_ex(h, ta, tb, m, n, k, &one, a, cuda_type(p), lda, b, cuda_type(p), ldb, &zero, c,
                                    CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

bool FullyConnected::has_cuda() const { return true; }

// Row-major x [N,IN], W [OUT,IN], y [N,OUT] are, column-major, X = x^T (IN x N), Wc = W^T (IN x OUT), Y = y^T (OUT x
// N).
void FullyConnected::forward_cuda(const Tensor& x, Tensor& y, const StepContext&) {
  const int n = static_cast<int>(x.dim(0)), in = static_cast<int>(p_.in_features),
            out = static_cast<int>(p_.out_features);
  const Precision p = precision();
  const cudaStream_t s = cuda_stream(exec().compute());
  // Y = Wc^T X
  gemm(cublas_of(exec()), p, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in,
       operand_of(p, MixedRole::W, w_.data(), w_.numel(), s), in, operand_of(p, MixedRole::X, x.data(), x.numel(), s),
       in, y.data(), out);
  if (p_.bias) {
    add_bias<<<grid_for(int64_t{n} * out), 256, 0, cuda_stream(exec().compute())>>>(y.data(), b_.data(), n, out);
    CHECK_LAUNCH("add_bias");
  }
}

void FullyConnected::backward_cuda(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  const int n = static_cast<int>(x.dim(0)), in = static_cast<int>(p_.in_features),
            out = static_cast<int>(p_.out_features);
  const Precision p = precision();
  const cudaStream_t s = cuda_stream(exec().compute());
  cublasHandle_t h = cublas_of(exec());
  const void* dyo = operand_of(p, MixedRole::Dy, dy.data(), dy.numel(), s);
  // dWc (IN x OUT) = X dY^T
  gemm(h, p, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, operand_of(p, MixedRole::X, x.data(), x.numel(), s), in, dyo, out,
       dw_.data(), in);
  if (p_.bias) {
    bias_grad<<<grid_for(out), 256, 0, cuda_stream(exec().compute())>>>(db_.data(), dy.data(), n, out);
    CHECK_LAUNCH("bias_grad");
  }
  // dX (IN x N) = Wc dY
  if (dx)
    gemm(h, p, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, operand_of(p, MixedRole::W, w_.data(), w_.numel(), s), in, dyo,
         out, dx->data(), in);
}

}  // namespace octet
