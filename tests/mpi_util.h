// Shared helpers of the MPI tests (run under mpirun -np 2 and -np 4): the world, cross-rank comparisons, temporary
// folders every rank sees and small synthetic configs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "comm/world.h"
#include "trainer/config.h"
#include "trainer/trainer.h"

namespace octet::test {

extern World g_world;  // the mpirun world (timeout lowered so that ranks that part ways fail in minutes)
// A test that cannot apply on this machine sets it (after saying why): a run that fails nothing then exits 77, which
// CTest reports as skipped (SKIP_RETURN_CODE), not as passed.
extern bool g_skipped;

uint64_t hash_floats(const std::vector<float>& v);
// True when every rank holds the same bytes.
bool identical_across_ranks(const std::vector<float>& v);
// A fresh folder that every rank sees (same machine): rank 0 creates it and broadcasts the name.
std::string shared_temp_dir();
// A 4-class synthetic 8x8 run named `name` in dir with the given layers and what follows them in the file.
Config small_config(const std::string& dir, const std::string& name, int64_t batch, int seed,
                    const std::string& layers_and_more);
// A conv/pool/relu/dropout/fc model for data parallelism, batch per rank; run name "r<batch>".
Config dp_config(const std::string& dir, int64_t batch, const std::string& extra = "");
// N-rank training (values a, result rd) against one rank on the same global batch (b, rs): float rounding apart,
// the same parameters, and test accuracy within one of the 48 test images.
void check_matches_single(const std::vector<float>& a, const std::vector<float>& b, const TrainResult& rd,
                          const TrainResult& rs);

// Trains config `full` uninterrupted and again stopped mid-epoch 2 and resumed, on world w; true when the two final
// checkpoints (parameters, optimizer state, position and every rank's error-feedback residuals) are the same bytes.
bool resume_matches(const World& w, const std::string& dir, Config full);

}  // namespace octet::test
