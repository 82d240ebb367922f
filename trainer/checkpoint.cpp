// The collective checkpoint save (per-rank sections gathered to rank 0, streamed into one atomic file) and load (rank 0
// reads and checks, the shared tensors are broadcast, each rank receives its own section).
#include "trainer/checkpoint.h"

#include <algorithm>
#include <cstring>

#include "comm/control.h"
#include "core/error.h"
#include "core/fileio.h"

namespace octet {

void save_checkpoint(const std::string& path, const TrainPosition& pos, const CheckpointState& state,
                     const World* world) {
  const int N = world ? world->size : 1, rank = world ? world->rank : 0;
  const std::string mine = checkpoint_section(rank, state.per_rank);
  int any = state.per_rank.empty() ? 0 : 1;
  if (world) any = max_all(*world, any, {"MPI_Iallreduce (checkpoint: per-rank state?)", pos.global_step});
  if (rank != 0) {
    if (any) send_bytes(*world, mine, 0, {"MPI_Isend (checkpoint: this rank's state to rank 0)", pos.global_step});
    return;
  }
  AtomicFile out(path);
  uint32_t crc = 0;
  auto emit = [&](const std::string& bytes) {
    crc = checkpoint_crc(crc, bytes);
    out.write(bytes.data(), bytes.size());
  };
  NamedTensors shared = state.shared;
  shared.insert(shared.end(), state.recorded.begin(), state.recorded.end());
  Tensor order({4});  // record.data_order: each count as two floats of 24 bits (exact below 2^48)
  if (state.global_batch > 0) {
    const int64_t v[2] = {state.global_batch, state.train_samples};
    for (int k = 0; k < 2; ++k)
      order.data()[2 * k] = static_cast<float>(v[k] >> 24),
                       order.data()[2 * k + 1] = static_cast<float>(v[k] & 0xffffff);
    shared.push_back({std::string(kRecordPrefix) + kDataOrder, &order});
  }
  emit(checkpoint_head(pos, N, shared, any != 0));
  if (any)
    for (int r = 0; r < N; ++r)
      emit(r == 0 ? mine : recv_bytes(*world, r, {"MPI_Irecv (checkpoint: a rank's state)", pos.global_step}));
  out.write(&crc, 4);
  out.commit();
}

std::vector<float> read_recorded(const std::string& path, const std::string& name) {
  try {
    const std::string bytes = read_file(path);
    const CheckpointFile file = parse_checkpoint(path, bytes);
    for (const CheckpointEntry& e : file.shared)
      if (e.name == kRecordPrefix + name) {
        int64_t n = 1;
        for (int64_t d : e.shape) n *= d;
        std::vector<float> out(static_cast<size_t>(n));
        std::memcpy(out.data(), e.data, out.size() * sizeof(float));
        return out;
      }
  } catch (const Error&) {
  }
  return {};
}

LoadedCheckpoint load_checkpoint(const std::string& path, const CheckpointState& state, const World* world) {
  const int N = world ? world->size : 1, rank = world ? world->rank : 0;
  int any = state.per_rank.empty() ? 0 : 1;
  if (world) any = max_all(*world, any, {"MPI_Iallreduce (resume: per-rank state?)"});
  std::string buf;
  CheckpointFile file;
  // epoch, batch, step, seed, ranks, per_rank, per_rank_used, recorded, global batch, training samples
  int64_t info[10] = {};
  std::string dropped;  // why the file's per-rank state does not fit this run (one rank)
  check_on_root(
      world,
      [&] {
        OCTET_CHECK(path_exists(path), path << ": checkpoint not found"
                                            << (path_exists(parent_dir(path) + "/config.yaml")
                                                    ? " (that run stopped before its first checkpoint: --resume auto "
                                                      "or --overwrite starts it afresh)"
                                                    : ""));
        buf = read_file(path);
        file = parse_checkpoint(path, buf);
        // The data order comes last in files that have it: its counts for the caller, not a tensor to restore.
        if (!file.shared.empty() && file.shared.back().name == std::string(kRecordPrefix) + kDataOrder) {
          const CheckpointEntry& e = file.shared.back();
          OCTET_CHECK(e.shape == Shape{4}, path << ": " << e.name << " at offset " << e.offset << " is not 4 values");
          float f[4];
          std::memcpy(f, e.data, sizeof f);
          for (int k = 0; k < 2; ++k) {
            OCTET_CHECK(f[2 * k] >= 0 && f[2 * k] < 16777216.f && f[2 * k + 1] >= 0 && f[2 * k + 1] < 16777216.f,
                        path << ": " << e.name << " at offset " << e.offset << " holds no counts");
            info[8 + k] = static_cast<int64_t>(f[2 * k]) << 24 | static_cast<int64_t>(f[2 * k + 1]);
          }
          file.shared.pop_back();
        }
        // The recorded tensors ("record.*") follow the shared ones in files that have them; restored when this run
        // records the same (names and shapes), else left to the caller to judge.
        std::vector<CheckpointEntry> recorded;
        while (file.shared.size() > state.shared.size() && file.shared.back().name.rfind(kRecordPrefix, 0) == 0) {
          recorded.insert(recorded.begin(), file.shared.back());
          file.shared.pop_back();
        }
        bool fits = !recorded.empty() && recorded.size() == state.recorded.size();
        for (size_t i = 0; fits && i < recorded.size(); ++i)
          fits = recorded[i].name == state.recorded[i].first && recorded[i].shape == state.recorded[i].second->shape();
        if (fits) copy_into(recorded, state.recorded);
        info[7] = fits;
        check_match(path, file.shared, state.shared, "parameters and optimizer state");
        const bool sections = !file.sections.empty();
        if (sections && any)
          OCTET_CHECK(static_cast<int>(file.ranks) == N,
                      path << ": written by " << file.ranks << " ranks with per-rank error-feedback state; "
                           << "resume it with " << file.ranks << " ranks (mpirun -np " << file.ranks << ")");
        if (sections && any && N == 1) try {
            check_match(path, file.sections[0].entries, state.per_rank, "rank 0's error-feedback state");
          } catch (const Error& e) {
            dropped = e.message();
          }
        copy_into(file.shared, state.shared);
        info[0] = file.pos.epoch, info[1] = file.pos.batch, info[2] = file.pos.global_step;
        std::memcpy(&info[3], &file.pos.seed, 8);
        info[4] = file.ranks, info[5] = sections, info[6] = sections && any && dropped.empty();
      },
      "MPI_Ibcast (resume: reading the checkpoint)");
  if (world) broadcast(*world, info, 10, 0, {"MPI_Ibcast (resume: checkpoint position)"});
  LoadedCheckpoint out;
  out.pos = {info[0], info[1], info[2], 0};
  std::memcpy(&out.pos.seed, &info[3], 8);
  out.ranks = static_cast<int>(info[4]), out.per_rank = info[5] != 0, out.per_rank_used = info[6] != 0;
  out.per_rank_dropped = out.per_rank && any && !out.per_rank_used;
  if (out.per_rank_dropped) out.why_dropped = dropped;
  out.recorded = info[7] != 0;
  out.global_batch = info[8], out.train_samples = info[9];
  if (world) {
    for (const auto& [name, t] : state.shared)
      broadcast(*world, t->data(), t->numel(), 0, {"MPI_Ibcast (resume: shared tensors)"});
    if (out.recorded)
      for (const auto& [name, t] : state.recorded)
        broadcast(*world, t->data(), t->numel(), 0, {"MPI_Ibcast (resume: recorded tensors)"});
  }
  if (!out.per_rank_used) return out;
  if (N == 1) {
    copy_into(file.sections[0].entries, state.per_rank);
    return out;
  }
  // Each rank's section travels as its bytes (with its file offset, for errors) and is checked by that rank.
  std::string mine;
  uint64_t base = 0;
  if (rank == 0) {
    for (int r = N - 1; r >= 1; --r) {
      const CheckpointSection& s = file.sections[r];
      const uint64_t off = s.offset;
      send_bytes(*world, std::string(reinterpret_cast<const char*>(&off), 8), r,
                 {"MPI_Isend (resume: section offset)"});
      send_bytes(*world, buf.substr(s.offset, s.end - s.offset), r, {"MPI_Isend (resume: a rank's section)"});
    }
    mine = buf.substr(file.sections[0].offset, file.sections[0].end - file.sections[0].offset);
    base = file.sections[0].offset;
  } else {
    const std::string off = recv_bytes(*world, 0, {"MPI_Irecv (resume: section offset)"});
    OCTET_CHECK(off.size() == 8, path << ": internal: section offset of " << off.size() << " bytes");
    std::memcpy(&base, off.data(), 8);
    mine = recv_bytes(*world, 0, {"MPI_Irecv (resume: this rank's section)"});
  }
  // A section that does not fit this run's state (another compression config: a powersgd rank, a hierarchy) is dropped
  // on every rank alike, and the run starts its residuals at zero.
  const std::vector<CheckpointEntry> entries = parse_section(path, mine, base, rank);
  try {
    check_match(path, entries, state.per_rank, "rank " + std::to_string(rank) + "'s error-feedback state");
  } catch (const Error& e) {
    dropped = e.message();
  }
  // The lowest rank whose section does not fit (rank 0 logs its own reason when it is one).
  const int bad_rank =
      N - max_all(*world, dropped.empty() ? 0 : N - rank, {"MPI_Iallreduce (resume: per-rank state fits?)"});
  if (bad_rank == N) {
    copy_into(entries, state.per_rank);
    return out;
  }
  out.per_rank_used = false, out.per_rank_dropped = true;
  out.why_dropped = rank == bad_rank ? dropped : "rank " + std::to_string(bad_rank) + "'s does not fit";
  return out;
}

}  // namespace octet
