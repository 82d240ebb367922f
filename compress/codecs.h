// Factories of the codecs in the registry (each defined in its own file set).
#pragma once
#include "compress/codec.h"

namespace octet {

CodecPtr make_none(const CodecParams& p);
CodecPtr make_fp16(const CodecParams& p);
CodecPtr make_linear8(const CodecParams& p);
CodecPtr make_mantissa8(const CodecParams& p);
CodecPtr make_static_tree8(const CodecParams& p);
CodecPtr make_dynamic_tree8(const CodecParams& p);
CodecPtr make_qsgd(const CodecParams& p);
CodecPtr make_onebit(const CodecParams& p);
CodecPtr make_topk(const CodecParams& p);
CodecPtr make_adacomp(const CodecParams& p);

// The 128 non-negative magnitudes of an 8-bit type (ascending; [0] = 0, [127] = 1), used by tests and benches.
std::vector<float> codebook8(const std::string& method, int mantissa_offset = 1);

}  // namespace octet
