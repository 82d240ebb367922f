// The process-wide oneDNN CPU engine and stream, and helpers to wrap octet tensors as oneDNN memory.
#pragma once
#include <dnnl.hpp>

#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace octet {

dnnl::engine& dnnl_engine();
dnnl::stream& dnnl_stream();

// A plain (row-major, NCHW-family) memory descriptor for the given dims (fp32 unless said).
dnnl::memory::desc plain_md(const dnnl::memory::dims& dims, DType t = DType::F32);
// An [N,C,H,W] activation's descriptor in layout `block` (core/layout.h): plain for 0, else nChw16c or nChw8c.
dnnl::memory::desc act_md(const dnnl::memory::dims& dims, int block, DType t = DType::F32);
dnnl::memory::data_type dnnl_type(DType t);  // f32, bf16
// Wraps a raw pointer as oneDNN memory of the given descriptor (no copy).
dnnl::memory wrap(const dnnl::memory::desc& md, const void* p);

// Sets the number of threads for oneDNN and octet's own OpenMP loops. 0 = the cores this process may run on; where
// those are all the machine's (no launcher bound the process), shared out among the node_ranks processes that run on
// it, at least one each (4 ranks of 2 threads each on 2 cores would spin against each other).
void set_cpu_threads(int threads, int node_ranks = 1);
int cpu_threads();
int usable_cores();  // the cores this process may run on (its affinity: a launcher may have bound it to fewer)

}  // namespace octet
