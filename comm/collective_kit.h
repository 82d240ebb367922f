// What the reduction algorithms' own files share (defined in comm/collectives.cpp; internal to comm/): payload buffers
// on a device, encoding with error feedback, the mean's scale, payload slots, the scatter phase (encode the chunks,
// move them to their owners), the payloads received, and the codec phases' timing.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/collectives.h"
#include "compress/codec_device.h"
#include "core/trace.h"

namespace octet::kit {

size_t align16(size_t x);
int as_count(size_t bytes);               // a payload size as the transport's int count (checked)
Exec& exec_of(const ReduceOptions& opt);  // where the values are and the codecs run (the host when unset)
// Buffers on device d (a state first used on another device is re-made).
void on_device(Buffer<uint8_t>& b, Device d);
void on_device(Tensor& t, int64_t n, Device d);
// st.scratch with room for 3n floats on d (error feedback's y and sent, the owner step's sum).
float* scratch_for(ReduceState& st, int64_t n, Device d);
// Encodes x[0..n) (with error feedback on `residual` when given) into out; returns the payload size.
size_t encode(const Codec& c, const float* x, int64_t n, float* residual, uint8_t* out, uint64_t seed, ReduceState& st,
              Exec& ex);
// x *= 1/world where ex runs (its comm stream on a device).
void scale(float* x, int64_t n, int world, Exec& ex);
// Displacements of 16-byte aligned slots for the given counts; returns the total.
size_t displacements(const std::vector<int>& counts, std::vector<int>& displs);
// The scatter phase's encoding, shared by scatter-allgather and reduce-scatter: x's chunk [lo[j], lo[j+1]) goes
// through the codec (error feedback on res[lo[j]..] when res is set) into st.send, for rank j.
void scatter_encode(int N, int r, const float* x, const std::vector<int64_t>& lo, float* res, uint64_t seed,
                    const ReduceOptions& opt, ReduceState& st, CommStats& stats);
// The scatter phase's transfer: every rank's payload of this rank's chunk ends in st.recv. seconds: its time.
void scatter_transfer(Transport& tr, ReduceState& st, const Progress& p, const char* what, double* seconds);
// The payloads st.recv holds from each rank, in rank order.
std::vector<Span<const uint8_t>> received(const ReduceState& st);

// A codec phase of an exchange (name: encode, reduce, decode; compress: whether it counts as compress_s, else
// decompress_s), traced as TraceSpan traces it. Its time goes to *acc from the host's clock on the CPU; on a device,
// where the host only queues the phase's kernels, the device's clock times it (DevicePhaseSpan) and the exchange's
// deferred-check scope adds it to the stats when it finishes (reduce_mean, GradSync::sync_set), so *acc gains nothing
// here.
class PhaseSpan {
 public:
  PhaseSpan(Exec& ex, const char* name, const char* what, double* acc, bool compress)
      : dev_(ex, compress), host_(name, what, dev_.active() ? nullptr : acc) {}

 private:
  DevicePhaseSpan dev_;  // (destroyed after host_: the host's span ends first)
  TraceSpan host_;
};
// Adds the device times of the codec phases a finished deferred-check scope returns to stats.
inline void add_device_phases(const DevicePhaseTimes& t, CommStats& stats) {
  stats.compress_s += t.compress_s;
  stats.decompress_s += t.decompress_s;
}

}  // namespace octet::kit
