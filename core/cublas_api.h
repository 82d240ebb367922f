// cuBLAS loaded on first use (dlopen): linking it would map libcublasLt (~540 MB) into every process and cost
// ~210 MB of resident memory even in CPU-only runs. Include only from .cu files.
#pragma once
#include <cublas_v2.h>

namespace octet {

struct CublasApi {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSgemm_v2) sgemm;
  // cublasGemmEx (C++ overloads it): mixed precision, 16-bit or tf32 operands with fp32 accumulation
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  decltype(&cublasGetStatusString) status_string;
};

// Loads libcublas on the first call; throws naming the library when it cannot be found.
const CublasApi& cublas_api();

}  // namespace octet
