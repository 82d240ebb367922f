// The relayout dispatcher and its host twin (layers/relayout.h).
#include "layers/relayout.h"

#include "core/error.h"
#include "core/launch.h"
#include "core/layout.h"

namespace octet {

void relayout_host(const void* src, DType st, int sl, void* dst, DType dt, int dl, Shape nchw, const Stream&) {
  relayout_values(src, st, sl, dst, dt, dl, nchw);
}

void relayout(const Tensor& src, int sl, Tensor& dst, int dl, const Stream& s) {
  OCTET_CHECK(src.shape() == dst.shape() && src.device() == dst.device() && src.ndim() == 4,
              "relayout: " << shape_str(src.shape()) << " on " << device_name(src.device()) << " into "
                           << shape_str(dst.shape()) << " on " << device_name(dst.device()));
  launch_twin("relayout", relayout_host, OCTET_CUDA_TWIN(relayout_cuda), s, src.raw(), src.dtype(), sl, dst.raw(),
              dst.dtype(), dl, src.shape());
}

}  // namespace octet
