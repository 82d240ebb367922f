// Checkpoints of a run: the position in training, the tensors every rank shares (weights, optimizer state) and each
// rank's own state (error-feedback residuals), written atomically as one CRC-protected file by rank 0.
#pragma once
#include <string>

#include "comm/world.h"
#include "trainer/checkpoint_format.h"

namespace octet {

constexpr const char* kRecordPrefix = "record.";
constexpr const char* kDataOrder = "data_order";  // (record.data_order: CheckpointState::global_batch)

struct CheckpointState {
  NamedTensors shared;    // identical on every rank: rank 0's copy is written, every rank receives it
  NamedTensors per_rank;  // each rank's own, in one section per rank (names and shapes may differ between ranks)
  // Shared too, written after `shared`, named kRecordPrefix + ...: what a run records of itself (the auto plan it
  // trained under). A file without them, or with others, still loads: they are restored only where names and shapes
  // match.
  NamedTensors recorded;
  // The global batch and the training samples the run's batches are drawn by (written as record.data_order when set;
  // never restored: a resume inside an epoch compares them, LoadedCheckpoint::global_batch).
  int64_t global_batch = 0, train_samples = 0;
};

// Writes path atomically. With a world it is collective: each rank's per_rank tensors travel to rank 0 one rank at a
// time and rank 0 writes the one file (no folder shared between hosts needed). world == nullptr: one process.
void save_checkpoint(const std::string& path, const TrainPosition& pos, const CheckpointState& state,
                     const World* world = nullptr);

struct LoadedCheckpoint {
  TrainPosition pos;
  int ranks = 0;               // the world size that wrote it (0: a version-1 file, which does not say)
  bool per_rank = false;       // it holds per-rank sections
  bool per_rank_used = false;  // ... and they were restored (this run keeps per-rank state too)
  // ... or they did not fit this run's (its compression config changed): nothing restored, residuals start at zero
  bool per_rank_dropped = false;
  std::string why_dropped;  // this rank's view of the mismatch (rank 0's is logged)
  bool recorded = false;    // the file holds state.recorded (restored); false: those tensors are left as they were
  int64_t global_batch = 0, train_samples = 0;  // the file's record.data_order (0: a file without it)
};

// Collective likewise: rank 0 reads and checks the file (its errors reach every rank), every rank receives the shared
// tensors and checks and restores its own section. Names, count and shapes must match exactly; on an error in the
// file no tensor is changed and the message names the file and offset. Per-rank state that does not match this run's
// (names, count or shapes: another compression config) is dropped on every rank (per_rank_dropped). A file without
// sections leaves
// per_rank as it is (zero residuals: a run that starts a codec with error feedback); a run without per-rank state
// ignores the file's sections; a file written by another number of ranks with sections is refused (each section
// belongs to one rank's shard of the exchange).
LoadedCheckpoint load_checkpoint(const std::string& path, const CheckpointState& state, const World* world = nullptr);

// One recorded tensor's values (kRecordPrefix + name) read from a checkpoint file on this process; empty when the file
// holds none or cannot be read (load_checkpoint then says why).
std::vector<float> read_recorded(const std::string& path, const std::string& name);

}  // namespace octet
