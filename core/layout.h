// Activation layouts: plain NCHW, oneDNN's channel-blocked nChw{B}c (channels in blocks of B, a block's B values of
// one position adjacent), which the CPU's direct convolutions read and write, or channels-last NHWC (kNhwc: the GPU's
// for a bf16 model's activations, what tensor cores read; nChw{C}c, one block of every channel). A model keeps a run
// of layers in one layout (Model::set_layout) so that no reorder sits between them; the offsets here are shared by the
// CPU loops of the layers that take it and by the CUDA kernels.
#pragma once
#include <cstdint>
#include <type_traits>

#include "core/hd.h"
#include "core/tensor.h"

namespace octet {

// The layout value of channels-last (NHWC): every channel one block.
constexpr int kNhwc = -1;
// The channels a position holds adjacent in layout `layout` of a tensor of C channels (0: plain).
OCTET_HD int64_t layout_lanes(int layout, int64_t C) { return layout == kNhwc ? C : layout; }

// Element (b, c, p) of an [N,C,H,W] tensor (p = h * W + w, HW = H * W) with B lanes a position (layout_lanes): 0
// plain, else nChw{B}c (C a multiple of B; B = C: NHWC).
OCTET_HD int64_t nchw_offset(int64_t b, int64_t c, int64_t p, int64_t C, int64_t HW, int64_t B) {
  return B == 0 ? (b * C + c) * HW + p : ((b * (C / B) + c / B) * HW + p) * B + c % B;
}
// The distance between two positions of one channel: 1 plain, B blocked.
OCTET_HD int64_t position_stride(int64_t B) { return B == 0 ? 1 : B; }

[[noreturn]] void throw_block(int block, const char* what);  // (with_block's error)

// Runs fn(std::integral_constant<int, L>{}) for a layout's lanes a position L: 1 (plain), 8 or 16 (blocked), so that
// CPU loops over a sample's block of L channels compile for each (others are refused naming what).
template <typename Fn>
void with_block(int block, const char* what, Fn fn) {
  if (block == 16) return fn(std::integral_constant<int, 16>{});
  if (block == 8) return fn(std::integral_constant<int, 8>{});
  if (block != 0) throw_block(block, what);
  fn(std::integral_constant<int, 1>{});
}

// The channel block of this CPU's direct convolutions (oneDNN's choice for fp32 and bf16): 16 with AVX-512, else 8.
int cpu_channel_block();
// "nchw", "nChw16c", "nhwc": a layout's name, as oneDNN writes it.
const char* layout_name(int block);
// Whether a per-sample shape [C,H,W] can be held in layout B (4-D with a batch: C a multiple of B; NHWC any C).
bool layout_fits(const Shape& per_sample, int block);
// dst [N,C,H,W] plain <- src in layout `block` (same shape and type), on the host: for tests, checks and dumps.
void to_plain(const Tensor& src, int block, Tensor& dst);
// dst in layout `block` <- src plain [N,C,H,W], on the host.
void from_plain(const Tensor& src, int block, Tensor& dst);
// The same values between layouts and element types (dst sized [N,C,H,W] like src; either type; bf16 rounded to nearest
// even), over raw storage on the calling thread: the relayout twin of the host and the simulated device.
void relayout_values(const void* src, DType st, int sl, void* dst, DType dt, int dl, const Shape& nchw);

}  // namespace octet
