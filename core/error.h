// Typed errors carrying file:line and context, and the one CHECK macro family (octet, MPI, CUDA, cuDNN, cuBLAS).
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace octet {

// Every library failure is an octet::Error; only main() catches it and prints what() as one line.
class Error : public std::runtime_error {
 public:
  Error(std::string message, std::string where)
      : std::runtime_error(message + " [" + where + "]"), message_(std::move(message)), where_(std::move(where)) {}
  const std::string& message() const { return message_; }  // without the [file:line] suffix
  const std::string& where() const { return where_; }

 private:
  std::string message_, where_;
};

// NaN or infinity where only finite values make sense (a codec's input, an updated weight, the loss): the trainer
// catches it to name the step and the first layer affected.
class NonFiniteError : public Error {
 public:
  using Error::Error;
};

// An error every rank of a job throws alike (a check made on rank 0 and shared): rank 0 alone reports it.
class SharedError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void throw_error(const char* file, int line, const std::string& message);
[[noreturn]] void throw_nonfinite(const char* file, int line, const std::string& message);

}  // namespace octet

// OCTET_THROW("bad value " << v): builds the message with a stream and throws octet::Error.
#define OCTET_THROW(stream_expr)                               \
  do {                                                         \
    std::ostringstream octet_os_;                              \
    octet_os_ << stream_expr;                                  \
    ::octet::throw_error(__FILE__, __LINE__, octet_os_.str()); \
  } while (0)

#define OCTET_THROW_NONFINITE(stream_expr)                         \
  do {                                                             \
    std::ostringstream octet_os_;                                  \
    octet_os_ << stream_expr;                                      \
    ::octet::throw_nonfinite(__FILE__, __LINE__, octet_os_.str()); \
  } while (0)

#define OCTET_CHECK(cond, stream_expr)     \
  do {                                     \
    if (!(cond)) OCTET_THROW(stream_expr); \
  } while (0)

// The library-call checks expand only where used, so a file includes just the header of the library it calls.
#define CHECK_MPI(call)                                                         \
  do {                                                                          \
    int octet_rc_ = (call);                                                     \
    if (octet_rc_ != MPI_SUCCESS) {                                             \
      char octet_buf_[MPI_MAX_ERROR_STRING];                                    \
      int octet_len_ = 0;                                                       \
      MPI_Error_string(octet_rc_, octet_buf_, &octet_len_);                     \
      OCTET_THROW(#call << " failed: " << std::string(octet_buf_, octet_len_)); \
    }                                                                           \
  } while (0)

#define CHECK_CUDA(call)                                                                                         \
  do {                                                                                                           \
    cudaError_t octet_rc_ = (call);                                                                              \
    if (octet_rc_ != cudaSuccess)                                                                                \
      OCTET_THROW(#call << " failed: " << cudaGetErrorName(octet_rc_) << ": " << cudaGetErrorString(octet_rc_)); \
  } while (0)

// After a kernel launch: a bad configuration or a sticky earlier error, naming the kernel.
#define CHECK_LAUNCH(what)                                                                   \
  do {                                                                                       \
    const cudaError_t octet_rc_ = cudaGetLastError();                                        \
    if (octet_rc_ != cudaSuccess)                                                            \
      OCTET_THROW("launch of " << what << " failed: " << cudaGetErrorName(octet_rc_) << ": " \
                               << cudaGetErrorString(octet_rc_));                            \
  } while (0)

#define CHECK_CUDNN(call)                                                                                       \
  do {                                                                                                          \
    cudnnStatus_t octet_rc_ = (call);                                                                           \
    if (octet_rc_ != CUDNN_STATUS_SUCCESS) OCTET_THROW(#call << " failed: " << cudnnGetErrorString(octet_rc_)); \
  } while (0)

#define CHECK_CUBLAS(call)                                                                 \
  do {                                                                                     \
    cublasStatus_t octet_rc_ = (call);                                                     \
    if (octet_rc_ != CUBLAS_STATUS_SUCCESS)                                                \
      OCTET_THROW(#call << " failed: " << ::octet::cublas_api().status_string(octet_rc_)); \
  } while (0)
