// The activation layouts' host-side helpers (core/layout.h): the CPU's channel block and plain <-> blocked copies.
#include "core/layout.h"

#include <dnnl.hpp>

#include "core/error.h"

namespace octet {

int cpu_channel_block() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core || isa == dnnl::cpu_isa::avx512_core_vnni ||
                 isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx
             ? 16
             : 8;
}

void throw_block(int block, const char* what) {
  OCTET_THROW(what << ": no loops for channel blocks of " << block << " (0, 8 and 16 are built)");
}

const char* layout_name(int block) { return block == 0 ? "nchw" : block == 16 ? "nChw16c" : "nChw8c"; }

bool layout_fits(const Shape& s, int block) { return block > 0 && s.size() == 3 && s[0] % block == 0; }

namespace {

// Copies between the layouts: plain index from blocked index or back, element by element.
void relayout(const Tensor& src, Tensor& dst, int block, bool to_blocked) {
  OCTET_CHECK(src.device() == Device::CPU && src.ndim() == 4 && (block == 0 || src.dim(1) % block == 0),
              "relayout: a host [N,C,H,W] tensor with C a multiple of " << block << " expected, got "
                                                                        << shape_str(src.shape()));
  if (dst.device() != Device::CPU) dst = Tensor(Shape{0});
  dst.resize(src.shape());
  const int64_t N = src.dim(0), C = src.dim(1), HW = src.dim(2) * src.dim(3);
  const float* s = src.data();
  float* d = dst.data();
  for (int64_t b = 0; b < N; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < HW; ++p) {
        const int64_t plain = nchw_offset(b, c, p, C, HW, 0), blocked = nchw_offset(b, c, p, C, HW, block);
        if (to_blocked)
          d[blocked] = s[plain];
        else
          d[plain] = s[blocked];
      }
}

}  // namespace

void to_plain(const Tensor& src, int block, Tensor& dst) { relayout(src, dst, block, false); }
void from_plain(const Tensor& src, int block, Tensor& dst) { relayout(src, dst, block, true); }

}  // namespace octet
