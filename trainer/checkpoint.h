// Versioned binary checkpoints: position in training, seed, and named tensors (weights and optimizer state),
// CRC-protected and written atomically.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace octet {

struct TrainPosition {
  int64_t epoch = 0;        // epoch to run next
  int64_t batch = 0;        // first batch of that epoch still to run
  int64_t global_step = 0;  // steps taken so far
  uint64_t seed = 0;        // the run seed (keys shuffles and dropout masks)
};

using NamedTensors = std::vector<std::pair<std::string, Tensor*>>;

constexpr uint32_t kCheckpointVersion = 1;

void save_checkpoint(const std::string& path, const TrainPosition& pos, const NamedTensors& tensors);
// Restores into the given tensors; names, count and shapes must match exactly. Errors name the file and offset.
TrainPosition load_checkpoint(const std::string& path, const NamedTensors& tensors);

}  // namespace octet
