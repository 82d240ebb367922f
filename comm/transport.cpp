// The transports by name (parallel.transport): an explicit table; an unknown name fails listing the known ones.
#include <functional>
#include <vector>

#include "comm/mpi_transport.h"
#include "core/error.h"
#ifdef OCTET_WITH_CUDA
#include "comm/nccl_transport.h"
#endif

namespace octet {

Stream transfer_stream(Exec& ex, const Progress& p) {
  OCTET_CHECK(!p.after == !p.done, "a device transfer ordered by events needs both of them (Progress::after, done)");
  if (!p.after) return ex.comm();
  ex.wait(ex.stage(), *p.after);
  return ex.stage();
}

void transfer_done(Exec& ex, const Progress& p, const Stream& s) {
  if (p.done) *p.done = ex.record(s);
}

namespace {
struct TransportEntry {
  const char* name;
  std::function<std::unique_ptr<Transport>(const World&, Exec&)> make;
};
}  // namespace

std::unique_ptr<Transport> make_transport(const std::string& name, const World& w, Exec& exec) {
  static const std::vector<TransportEntry> table = {
      {"mpi", [](const World& w, Exec&) { return std::make_unique<MpiTransport>(w); }},
      {"nccl",
       [](const World& w, Exec& ex) -> std::unique_ptr<Transport> {
#ifdef OCTET_WITH_CUDA
         return std::make_unique<NcclTransport>(w, ex);
#else
         (void)w, (void)ex;
         OCTET_THROW("parallel.transport: nccl: this octet was built without CUDA");
#endif
       }},
  };
  std::string known;
  for (const auto& e : table) {
    if (name == e.name) return e.make(w, exec);
    known += (known.empty() ? "" : ", ") + std::string(e.name);
  }
  OCTET_THROW("unknown transport '" << name << "' (known: " << known << ")");
}

}  // namespace octet
