// uint8 batches for a device: the loader sends each sample's bytes and its draws (4x fewer bytes across PCIe than
// normalized fp32), and this kernel pair applies crop_padding, flip and the normalization where the model runs, to the
// same bits as the host path (data/augment.h's normalized_pixel).
#pragma once
#include <cstdint>
#include <vector>

#include "core/exec.h"
#include "data/augment.h"

namespace octet {

// The normalization's arrays as the kernels read them: scale [C], shift [C], then (with a mean image) pixel_shift
// [C,H,W].
std::vector<float> affine_table(const ChannelAffine& a);

// out [B,C,H,W] fp32 from src [B,C,H,W] uint8 under draws [B] (null: none) and affine (affine_table's layout;
// per_pixel: it holds the mean image). Pointers where the kernel runs; queued on s (the CPU twin runs at once).
void normalize_batch_cpu(const uint8_t* src, const SampleDraw* draws, const float* affine, int per_pixel, int64_t B,
                         int64_t C, int64_t H, int64_t W, float* out, const Stream& s);
void normalize_batch_cuda(const uint8_t* src, const SampleDraw* draws, const float* affine, int per_pixel, int64_t B,
                          int64_t C, int64_t H, int64_t W, float* out, const Stream& s);

}  // namespace octet
