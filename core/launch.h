// Running an op's twins on a stream's device: the CPU reference at once on the CPU, the CUDA launcher queued on a GPU
// stream, and on the simulated device the CPU twin as a kernel queued on that stream (core/sim.h: it runs when the
// stream is flushed, after the work queued before it). The twins share one signature ending in the stream (llm.c's
// explicit streams); their arguments are pointers and values, held by the queued kernel as they are at launch.
#pragma once
#include <string>
#include <utility>

#include "core/error.h"
#include "core/exec.h"
#include "core/sim.h"

// The CUDA twin of f where this build has one, else a null pointer of its type (f need only be declared).
#ifdef OCTET_WITH_CUDA
#define OCTET_CUDA_TWIN(f) (&f)
#else
#define OCTET_CUDA_TWIN(f) (static_cast<decltype(&f)>(nullptr))
#endif

namespace octet {

// cpu(args..., s) or cuda(args..., s) by s's device; op names the kernel in errors.
template <class Cpu, class Cuda, class... A>
void launch_twin(const char* op, Cpu cpu, Cuda cuda, const Stream& s, A... args) {
  switch (s.device) {
    case Device::CPU:
      cpu(args..., s);
      return;
    case Device::CUDA:
      OCTET_CHECK(cuda != nullptr, op << " on cuda: " << cuda_unavailable_reason());
      cuda(args..., s);
      return;
    case Device::Sim:
      sim::launch(sim_queue(s), op, [=] { cpu(args..., s); });
      return;
  }
}

// body as an eager kernel of s on the simulated device (its result is needed at once), as it is elsewhere.
template <class F>
decltype(auto) sim_eager(const Stream& s, const std::string& op, F&& body) {
  if (s.device != Device::Sim) return body();
  return sim::run(sim_queue(s), op, std::forward<F>(body));
}

}  // namespace octet
