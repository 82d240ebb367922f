// Implementation of core/dnnl_ctx.h.
#include "core/dnnl_ctx.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>

#include "core/sim.h"

namespace octet {

namespace {
// The simulated device's kernels run with the thread count of the thread that asks for them.
const bool kSimThreads = (sim::set_thread_hooks(&omp_get_max_threads, &omp_set_num_threads), true);
}  // namespace

dnnl::engine& dnnl_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

dnnl::stream& dnnl_stream() {
  static dnnl::stream s(dnnl_engine());
  return s;
}

dnnl::memory::data_type dnnl_type(DType t) {
  return t == DType::F32    ? dnnl::memory::data_type::f32
         : t == DType::Bf16 ? dnnl::memory::data_type::bf16
                            : dnnl::memory::data_type::f16;
}

dnnl::memory::desc plain_md(const dnnl::memory::dims& dims, DType t) {
  using tag = dnnl::memory::format_tag;
  static const tag tags[] = {tag::undef, tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde};
  return dnnl::memory::desc(dims, dnnl_type(t), tags[dims.size()]);
}

dnnl::memory::desc act_md(const dnnl::memory::dims& dims, int block, DType t) {
  if (block == 0) return plain_md(dims, t);
  using tag = dnnl::memory::format_tag;
  return dnnl::memory::desc(dims, dnnl_type(t), block == 16 ? tag::nChw16c : tag::nChw8c);
}

dnnl::memory wrap(const dnnl::memory::desc& md, const void* p) {
  return dnnl::memory(md, dnnl_engine(), const_cast<void*>(p));
}

void set_cpu_threads(int threads, int node_ranks) {
  if (threads <= 0) {
    const int usable = usable_cores();
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    threads = usable >= online && node_ranks > 1 ? std::max(1, usable / node_ranks) : usable;
  }
  omp_set_num_threads(threads);
}
int cpu_threads() { return omp_get_max_threads(); }
int usable_cores() { return omp_get_num_procs(); }

}  // namespace octet
