// The loss head's per-sample ranking, shared by the CPU loop and the CUDA kernel: where the label's logit ranks among
// all K (ties go to the lower index, as argmax takes the first maximum), for top-1 and top-5 accuracy.
#pragma once
#include <cstdint>

#include "core/hd.h"

namespace octet {

// The number of logits ahead of the label's: larger, or equal at a lower index. 0: the argmax; < 5: in the top 5.
OCTET_HD int64_t label_rank(const float* z, int64_t k, int32_t label) {
  const float zl = z[label];
  int64_t rank = 0;
  for (int64_t j = 0; j < k; ++j) rank += z[j] > zl || (z[j] == zl && j < label);
  return rank;
}

}  // namespace octet
