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

const char* layout_name(int block) {
  return block == 0 ? "nchw" : block == kNhwc ? "nhwc" : block == 16 ? "nChw16c" : "nChw8c";
}

bool layout_fits(const Shape& s, int block) {
  return s.size() == 3 && (block == kNhwc || (block > 0 && s[0] % block == 0));
}

void relayout_values(const void* src, DType st, int sl, void* dst, DType dt, int dl, const Shape& s) {
  OCTET_CHECK(s.size() == 4, "relayout: an [N,C,H,W] tensor expected, got " << shape_str(s));
  const int64_t N = s[0], C = s[1], HW = s[2] * s[3], ls = layout_lanes(sl, C), ld = layout_lanes(dl, C);
  OCTET_CHECK((ls == 0 || C % ls == 0) && (ld == 0 || C % ld == 0),
              "relayout: " << shape_str(s) << " cannot be held in " << layout_name(sl) << " and " << layout_name(dl));
  with_dtype(st, [&](auto a) {
    const auto* from = static_cast<const decltype(a)*>(src);
    with_dtype(dt, [&](auto b) {
      auto* to = static_cast<decltype(b)*>(dst);
#pragma omp parallel for collapse(2) schedule(static)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t p = 0; p < HW; ++p)
            store(to, nchw_offset(n, c, p, C, HW, ld), load(from, nchw_offset(n, c, p, C, HW, ls)));
    });
  });
}

namespace {

// Copies between the layouts: plain index from blocked index or back, element by element.
void relayout(const Tensor& src, Tensor& dst, int block, bool to_blocked) {
  OCTET_CHECK(src.device() == Device::CPU && src.ndim() == 4,
              "relayout: a host [N,C,H,W] tensor expected, got " << shape_str(src.shape()));
  if (dst.device() != Device::CPU) dst = Tensor(Shape{0});
  dst.resize(src.shape(), src.dtype());
  relayout_values(src.raw(), src.dtype(), to_blocked ? 0 : block, dst.raw(), dst.dtype(), to_blocked ? block : 0,
                  src.shape());
}

}  // namespace

void to_plain(const Tensor& src, int block, Tensor& dst) { relayout(src, dst, block, false); }
void from_plain(const Tensor& src, int block, Tensor& dst) { relayout(src, dst, block, true); }

}  // namespace octet
