// The byte layout of octet checkpoints, without MPI: "OCTETCKP", version, position, rank count, the shared tensors,
// per-rank sections, CRC32 trailer; writing its parts, parsing every length and offset, matching against tensors.
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

constexpr uint32_t kCheckpointVersion = 2;  // 1: no rank count, no per-rank sections (still read)

// Parsed structure; data points into the parsed bytes, which must outlive it.
struct CheckpointEntry {
  std::string name;
  Shape shape;
  size_t offset = 0;           // of the entry in the file
  const char* data = nullptr;  // fp32 values
};
struct CheckpointSection {
  uint32_t rank = 0;
  size_t offset = 0, end = 0;  // byte range in the file
  std::vector<CheckpointEntry> entries;
};
struct CheckpointFile {
  uint32_t version = 0, ranks = 0;
  TrainPosition pos;
  std::vector<CheckpointEntry> shared;
  std::vector<CheckpointSection> sections;
};

// Everything before the sections: magic, version, position, ranks, the shared tensors and the section count
// (sections ? ranks : 0).
std::string checkpoint_head(const TrainPosition& pos, int ranks, const NamedTensors& shared, bool sections);
// One rank's section: rank, tensor count, tensors.
std::string checkpoint_section(int rank, const NamedTensors& tensors);
uint32_t checkpoint_crc(uint32_t crc, const std::string& bytes);  // CRC32 (zlib's), chained
// A one-process checkpoint as bytes (head, a section when per_rank is not empty, CRC).
std::string encode_checkpoint(const TrainPosition& pos, const NamedTensors& shared, const NamedTensors& per_rank);

// Checks magic, version, CRC and every length; never reads outside bytes. Errors name path and offset.
CheckpointFile parse_checkpoint(const std::string& path, const std::string& bytes);
// A section's bytes on their own (as a rank receives them); base: their offset in the file, for errors.
std::vector<CheckpointEntry> parse_section(const std::string& path, const std::string& bytes, size_t base, int rank);
// Names in order, count and shapes must match (what: "parameters and optimizer state", for the error); copies nothing.
void check_match(const std::string& path, const std::vector<CheckpointEntry>& entries, const NamedTensors& tensors,
                 const std::string& what);
void copy_into(const std::vector<CheckpointEntry>& entries, const NamedTensors& tensors);

}  // namespace octet
