// The benchmarks behind `octet bench`: single-core codec throughput vs memcpy with mean relative error on N(0,1)
// and on real LeNet gradients, and allreduce time / algbw / busbw per codec beside dense MPI_Allreduce.
#include "tools/bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "comm/collectives.h"
#include "comm/courier.h"
#include "comm/mpi_transport.h"
#include "comm/staged_transport.h"
#include "comm/topology.h"
#include "comm/two_level.h"
#include "compress/codec.h"
#include "compress/simd.h"
#include "core/device.h"
#include "core/dnnl_ctx.h"
#include "core/error.h"
#include "core/fileio.h"
#include "core/rng.h"
#include "core/timer.h"
#include "core/trace.h"
#include "data/loader.h"
#include "layers/softmax_ce.h"
#include "trainer/config.h"
#include "layers/layer_def.h"
#include "optim/optimizer.h"
#include "tools/step_harness.h"
#include "trainer/trainer.h"
#include "tools/flags.h"

namespace octet {

namespace {

// Best of `reps` timings of f().
template <typename F>
double best_time(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t = now_seconds();
    f();
    best = std::min(best, now_seconds() - t);
  }
  return best;
}

double mean_rel_error(const std::vector<float>& x, const std::vector<float>& y) {
  return mean_relative_error(x.data(), y.data(), static_cast<int64_t>(x.size()));
}

// Gradients of every parameter of the config's model after `steps` SGD steps on its real training data.
std::vector<float> real_gradients(const std::string& config, int64_t steps) {
  Config cfg = load_config(config, {"run.threads=1"});
  set_cpu_threads(1);
  StepHarness run(cfg, 0, 1);
  for (int64_t s = 0; s <= steps; ++s) run.run();  // the last update leaves its step's gradients in place
  std::vector<float> g;
  for (auto& p : run.model().params()) g.insert(g.end(), p.grad->data(), p.grad->data() + p.grad->numel());
  return g;
}

// The --device flag (cpu|cuda|sim).
Device device_flag(const Flags& f) {
  const std::string name = f.str("device");
  const std::optional<Device> d = device_named(name);
  if (!d) f.fail("device", "expects cpu, cuda or sim, got '" + name + "'");
  return *d;
}

// Device-side codec throughput: encode and decode of n N(0,1) values on the device's comm stream (GPU 0, or the
// simulated device) against a device-to-device copy of the same buffer timed in the same repetitions (each timing ends
// with a stream sync).
int bench_compress_device(Device d, const std::vector<std::string>& codecs, int64_t n, int reps, int bits) {
  Exec& ex = d == Device::Sim ? Exec::sim() : Exec::cuda(0);
  ex.bind_thread();
  std::vector<float> host(static_cast<size_t>(n));
  Rng rng(1);
  for (auto& v : host) v = rng.normal();
  Tensor x({n}, d), y({n}, d), copy({n}, d);
  copy_sync(d, x.data(), host.data(), 4 * static_cast<size_t>(n), CopyKind::HostToDevice);
  const double mb = 4.0 * static_cast<double>(n);
  const std::string where = d == Device::Sim ? "the simulated device (its speed is no GPU's)" : cuda_device_describe(0);
  std::printf(
      "octet bench compress --device %s: %.0f MB of fp32 N(0,1) on %s, best of %d; x copy = against a "
      "device-to-device copy of the same buffer timed in the same repetitions (GB/s of fp32 input)\n",
      device_name(d), mb / 1e6, where.c_str(), reps);
  std::printf("%-14s %11s %10s %8s %11s %8s %9s %11s\n", "codec", "d2d GB/s", "comp GB/s", "x copy", "decomp GB/s",
              "x copy", "bytes/fp32", "err N(0,1)");
  for (const std::string& m : codecs) {
    CodecParams p;
    p.method = m;
    p.bits = bits;
    CodecPtr c = make_codec(p);
    Buffer<uint8_t> buf(c->max_bytes(n), d);
    size_t bytes = 0;
    double t_copy = 1e30, tc = 1e30, td = 1e30;
    for (int r = 0; r <= reps; ++r) {  // repetition 0 warms up (code book upload, scratch growth)
      const double a = best_time(1, [&] {
        copy_async(copy.data(), x.data(), 4 * static_cast<size_t>(n), CopyKind::DeviceToDevice, ex.comm());
        ex.sync(ex.comm());
      });
      const double b = best_time(1, [&] {
        bytes = c->encode(span_of(std::as_const(x)), {buf.data(), buf.size(), d}, {5, nullptr}, ex);
        ex.sync(ex.comm());
      });
      const double e = best_time(1, [&] {
        c->decode({buf.data(), bytes, d}, span_of(y), false, ex);
        ex.sync(ex.comm());
      });
      if (r > 0) t_copy = std::min(t_copy, a), tc = std::min(tc, b), td = std::min(td, e);
    }
    const Tensor back = y.to(Device::CPU);
    const double err = mean_relative_error(host.data(), back.data(), n);
    std::printf("%-14s %11.1f %10.1f %8.2f %11.1f %8.2f %9.4f %10.2f%%\n", m.c_str(), mb / t_copy / 1e9, mb / tc / 1e9,
                t_copy / tc, mb / td / 1e9, t_copy / td, static_cast<double>(bytes) / mb, 100 * err);
  }
  return 0;
}

}  // namespace

int bench_compress(const std::vector<std::string>& args) {
  Flags f("octet bench compress", "",
          {{"size", "BYTES", "buffer of N(0,1) fp32 values to encode and decode", "64M"},
           {"reps", "N", "repetitions; the best time of each is kept", "5"},
           {"codecs", "a,b,...", "codecs to measure", codec_list(CodecList::All)},
           {"bits", "2|4|8", "qsgd bits", "8"},
           {"config", "CFG", "also measure the error on this config's real gradients ('' = skip)",
            "configs/fashion-mnist/lenet.yaml"},
           {"grad-steps", "N", "SGD steps before the real gradients are taken", "100"},
           {"isa", "scalar|avx2|avx512", "highest instruction-set level of the codec kernels", isa_name(kBuiltIsa)},
           {"device", "cpu|cuda|sim",
            "where the codecs run (cuda: GPU 0, against a device-to-device copy; sim: the "
            "simulated device, a test of the GPU path, not of speed)",
            "cpu"}});
  if (f.parse_or_usage(args)) return 0;
  const int64_t n = f.bytes("size", 4, int64_t{1} << 34) / 4;
  const int reps = static_cast<int>(f.integer("reps", 1, 1000000));
  const int bits = static_cast<int>(f.integer("bits", 2, 8));
  if (const auto bad = check_codec_keys({.bits = bits}, true)) f.fail(bad->key, bad->message);
  const std::vector<std::string> codecs = f.list("codecs");
  for (const auto& m : codecs) make_codec({.method = m, .bits = bits});  // unknown names fail before any work
  const int64_t grad_steps = f.integer("grad-steps", 0, 1000000);
  const std::string config = f.str("config");
  const Device device = device_flag(f);
  if (device != Device::CPU) return bench_compress_device(device, codecs, n, reps, bits);
  OCTET_CHECK(config.empty() || path_exists(config),
              "octet bench compress: --config " << config << ": no such file"
                                                << (f.given("config") ? ""
                                                                      : " (the default is the repository's: run from "
                                                                        "its root, give --config PATH, or --config '' "
                                                                        "to skip the real gradients)"));
  set_cpu_threads(1);
  const Isa level = set_isa_cap(parse_isa(f.str("isa")));
  // 64-byte aligned, as the trainer's tensors are (cache-line-split vector loads would slow the codecs down)
  Tensor xt({n}), yt({n}), copyt({n});
  float *x = xt.data(), *y = yt.data(), *copy = copyt.data();
  Rng rng(1);
  for (int64_t i = 0; i < n; ++i) x[i] = rng.normal();
  const double mb = 4.0 * static_cast<double>(n);
  std::printf(
      "octet bench compress: %.0f MB of fp32 N(0,1), one core, best of %d, codec kernels %s (built: %s); x memcpy = "
      "against a memcpy of the same buffer timed in the same repetitions\n",
      mb / 1e6, reps, isa_name(level), isa_name(kBuiltIsa));
  const bool have_grads = !config.empty();
  std::vector<float> grads;
  if (have_grads) {
    grads = real_gradients(config, grad_steps);
    std::printf("real gradients: %zu values from %s after %lld SGD steps\n", grads.size(), config.c_str(),
                static_cast<long long>(grad_steps));
  }
  std::printf("%-14s %11s %10s %8s %10s %8s %9s %11s %11s\n", "codec", "memcpy GB/s", "comp GB/s", "x memcpy",
              "decomp GB/s", "x memcpy", "bytes/fp32", "err N(0,1)", "err grads");
  for (const std::string& m : codecs) {
    CodecParams p;
    p.method = m;
    p.bits = bits;
    CodecPtr c = make_codec(p);
    std::vector<uint8_t> buf(c->max_bytes(n));
    size_t bytes = 0;
    // memcpy, encode and decode alternate within each repetition, so a drift in this machine's speed (shared
    // cores) moves all three alike; each ratio divides the best times.
    double t_copy = 1e30, tc = 1e30, td = 1e30;
    for (int r = 0; r < reps; ++r) {
      t_copy = std::min(t_copy, best_time(1, [&] { std::memcpy(copy, x, 4 * static_cast<size_t>(n)); }));
      tc = std::min(tc, best_time(1, [&] { bytes = c->encode(x, n, buf.data(), {5, nullptr}); }));
      td = std::min(td, best_time(1, [&] { c->decode(buf.data(), bytes, y, n, false); }));
    }
    const double err = mean_relative_error(x, y, n);
    double gerr = -1;
    if (have_grads) {
      std::vector<uint8_t> gb(c->max_bytes(static_cast<int64_t>(grads.size())));
      std::vector<float> gy(grads.size());
      const size_t gbytes = c->encode(grads.data(), static_cast<int64_t>(grads.size()), gb.data(), {5, nullptr});
      c->decode(gb.data(), gbytes, gy.data(), static_cast<int64_t>(grads.size()), false);
      gerr = mean_rel_error(grads, gy);
    }
    char gbuf[32] = "          -";
    if (gerr >= 0) std::snprintf(gbuf, sizeof gbuf, "%10.2f%%", 100 * gerr);
    std::printf("%-14s %11.2f %10.2f %8.2f %10.2f %8.2f %9.4f %10.2f%% %s\n", m.c_str(), mb / t_copy / 1e9,
                mb / tc / 1e9, t_copy / tc, mb / td / 1e9, t_copy / td, static_cast<double>(bytes) / mb, 100 * err,
                gbuf);
  }
  return 0;
}

Flags allreduce_flags() {
  return Flags(
      "mpirun -np N octet bench allreduce", "",
      {{"min", "BYTES", "smallest buffer", "4K"},
       {"max", "BYTES", "largest buffer", "256M"},
       {"factor", "N", "each size is the previous one times N (>= 2)", "4"},
       {"codecs", "a,b,...", "codecs through octet's collectives, beside dense MPI_Allreduce",
        codec_list(CodecList::Allreduce)},
       {"iters", "N", "calls timed per size and codec (0: from 3 to 50, fewer for larger buffers)", "0"},
       {"bits", "2|4|8", "qsgd bits", "8"},
       {"device", "cpu|cuda|sim",
        "where the buffers are and the codecs run (cuda: GPU local_rank % GPUs; sim: the "
        "simulated device, a test of the GPU path, not of speed)",
        "cpu"},
       {"transport", "mpi|nccl",
        "how payloads move (mpi: from a GPU staged through page-locked host memory; nccl: device to device)", "mpi"},
       {"hierarchy", "flat|two_level",
        "the codecs' exchange: every rank a peer of every other, or node reduce-scatter, the codec between nodes "
        "(each local rank its shard), node all-gather",
        "flat"},
       {"ranks-per-node", "K",
        "lay the ranks out K to a node in rank order, as parallel.ranks_per_node (0: the nodes MPI sees)", "0"},
       {"chunk-mb", "MB|auto", "pipelined pieces of the codecs' exchanges (parallel.chunk_mb; 0: off)", "auto"},
       {"link", "RATE",
        "each node's network link (100mbit, 1gbit, 10gbit; none): adds the share of the wire ideal, the bytes a "
        "node must send to the others per call at that rate over the measured time",
        "none"}});
}

// A link rate as netbed and tc write it (100mbit, 1gbit, 2.5gbit, 10gbit) in bytes per second; 0 for none.
double link_bytes_per_s(const Flags& f) {
  const std::string r = f.str("link");
  if (r == "none") return 0;
  double v = 0;
  char unit[8] = {};
  if (std::sscanf(r.c_str(), "%lf%7s", &v, unit) == 2 && v > 0 && std::isfinite(v)) {
    const std::string u = unit;
    if (u == "kbit") return v * 1e3 / 8;
    if (u == "mbit") return v * 1e6 / 8;
    if (u == "gbit") return v * 1e9 / 8;
  }
  f.fail("link", "expects a rate such as 100mbit, 1gbit or 10gbit (or none), got '" + r + "'");
}

int bench_allreduce(const std::vector<std::string>& args, const World& w) {
  Flags f = allreduce_flags();
  if (f.parse_or_usage(args, w.rank != 0)) return 0;
  set_cpu_threads(1);
  const int64_t lo = f.bytes("min", 4, int64_t{1} << 32), hi = f.bytes("max", 4, int64_t{1} << 32);
  if (hi < lo) f.fail("max", "(" + f.str("max") + ") is below --min (" + f.str("min") + ")");
  const int64_t factor = f.integer("factor", 2, 1 << 20);
  const int64_t iters_flag = f.integer("iters", 0, 1000000);
  const int bits = static_cast<int>(f.integer("bits", 2, 8));
  if (const auto bad = check_codec_keys({.bits = bits}, true)) f.fail(bad->key, bad->message);
  const auto codecs = f.list("codecs");
  for (const auto& m : codecs) make_codec({.method = m, .bits = bits});
  const int N = w.size;
  const std::string via = f.str("transport");
  if (via != "mpi" && via != "nccl") f.fail("transport", "expects mpi or nccl, got '" + via + "'");
  const Device d = device_flag(f);
  const bool on_dev = on_device(d);  // device buffers (a GPU's or the simulated device's)
  if (via == "nccl" && d != Device::CUDA) f.fail("transport", "nccl needs --device cuda");
  const std::string hier = f.str("hierarchy");
  if (hier != "flat" && hier != "two_level") f.fail("hierarchy", "expects flat or two_level, got '" + hier + "'");
  const int per_node = static_cast<int>(f.integer("ranks-per-node", 0, 1 << 20));
  const double link = link_bytes_per_s(f);
  const double chunk_mb = f.str("chunk-mb") == "auto" ? -1 : f.number("chunk-mb", 0, 65536);
  Courier courier;
  Exec& ex = select_device(d, &w);
  TopologyHolder topo(w, per_node);
  const Topology& tp = topo.get();
  if (hier == "two_level") choose_hierarchy("two_level", tp, N, "octet bench allreduce --hierarchy");
  const TransportSet ts = make_transports(via, w, ex, hier == "two_level" ? &tp : nullptr);
  Transport& transport = *ts.world;
  const Levels levels = ts.levels();
  if (link > 0 && !tp.even())
    f.fail("link", "needs the same number of ranks on every node to compute a node's share (" + tp.describe() + ")");
  const int L = tp.node_sizes.front();
  if (w.rank == 0) {
    std::printf(
        "octet bench allreduce: %d ranks (%s), transport %s, exchange %s; time is the mean per call; algbw = "
        "bytes/time; busbw = algbw * 2(N-1)/N%s%s\n",
        N, tp.describe().c_str(), via.c_str(), hier.c_str(),
        link > 0 ? "; wire = (bytes each node sends to other nodes per call / link rate) / time" : "",
        on_dev
            ? "; waits = rank 0's host waits for the device per call (the sync after it included); enc, dec = rank 0's "
              "device time per call in the codecs' encode and decode phases (the owner step's counted as decode)"
            : "");
    std::printf("%12s %-14s %-34s %10s %10s %10s %9s %9s%s%s\n", "bytes", "codec", "algorithm", "time us", "algbw GB/s",
                "busbw GB/s", "vs dense", "sent/rank", link > 0 ? "  wire" : "",
                on_dev ? "  waits   enc us   dec us" : "");
  }
  for (int64_t bytes = lo; bytes <= hi; bytes *= factor) {
    const int64_t n = bytes / 4;
    std::vector<float> ref(static_cast<size_t>(n)), x(static_cast<size_t>(n));
    Rng rng(derive_seed(1, w.rank));
    for (auto& v : ref) v = rng.normal();
    Tensor dx = on_dev ? Tensor({n}, d) : Tensor();
    int iters = static_cast<int>(iters_flag);
    if (iters <= 0) iters = static_cast<int>(std::clamp<int64_t>((64 << 20) / std::max<int64_t>(bytes, 1), 3, 50));
    double dense_time = 0;
    for (size_t ci = 0; ci <= codecs.size(); ++ci) {
      const bool dense = ci == 0;
      CodecParams p;
      p.method = dense ? identity_codec() : codecs[ci - 1];
      p.bits = bits;
      CodecPtr c = make_codec(p);
      ReduceOptions opt{dense ? Algorithm::Allreduce : default_algorithm(*c), c.get(), false, 3};
      opt.exec = &ex;
      if (!dense && opt.algorithm == Algorithm::Allreduce)
        opt.algorithm = Algorithm::ScatterAllgather;  // fp32 through our path
      ReduceState st;
      TwoLevelState two_st;
      const bool two_level = !dense && levels.node;
      const std::vector<int64_t> sh = node_shards(n, L);
      const int64_t mine = two_level ? sh[tp.local_rank + 1] - sh[tp.local_rank] : n;  // the tensor, or its node shard
      if ((two_level ? *levels.cross : transport).pieces_on(d)) {  // pipelined pieces of what this rank compresses
        opt.piece = pipeline_piece(mine, chunk_mb);
        opt.courier = &courier;
      }
      CommStats stats;
      double total = 0;
      uint64_t waits = 0;
      for (int it = -1; it < iters; ++it) {  // iteration -1 warms up buffers
        std::memcpy(x.data(), ref.data(), 4 * static_cast<size_t>(n));
        if (on_dev) copy_sync(d, dx.data(), ref.data(), 4 * static_cast<size_t>(n), CopyKind::HostToDevice);
        CHECK_MPI(MPI_Barrier(w.comm));
        const double t = now_seconds();
        const uint64_t w0 = device_host_waits();
        CommStats s;
        if (two_level) {
          reduce_mean_two_level(levels, on_dev ? span_of(dx) : Span<float>{x.data(), x.size(), Device::CPU}, opt,
                                two_st, s);
          if (on_dev) ex.sync(ex.comm());
        } else if (on_dev) {  // device buffers: dense fp32 goes through the same staging as the payloads
          reduce_mean(transport, span_of(dx), opt, st, s);
          ex.sync(ex.comm());
        } else if (dense) {  // the baseline is the library's own blocking MPI_Allreduce (its tuned algorithms)
          CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, x.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, w.comm));
          s.bytes_sent = static_cast<uint64_t>(2.0 * (N - 1) / N * 4.0 * static_cast<double>(n));  // ring-equivalent
        } else {
          reduce_mean(transport, {x.data(), x.size(), Device::CPU}, opt, st, s);
        }
        double dt = now_seconds() - t;
        if (it >= 0) waits += device_host_waits() - w0;
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, w.comm));
        if (it >= 0) total += dt, stats += s;
      }
      const double t = total / iters;
      if (dense) dense_time = t;
      const double algbw = static_cast<double>(bytes) / t / 1e9;
      // What one node sends to the others per call: its L ranks' payload bytes, of which a flat exchange sends the
      // share (N - L) / (N - 1) off the node (equal payloads per peer); the two-level exchange counts only those.
      double off_node = static_cast<double>(stats.bytes_sent) / iters;
      if (!two_level && N > 1) off_node *= static_cast<double>(N - L) / (N - 1);
      const double wire = link > 0 && t > 0 ? L * off_node / link / t : 0;
      char wire_col[32] = "";
      if (link > 0) std::snprintf(wire_col, sizeof wire_col, " %5.0f%%", 100 * wire);
      char waits_col[64] = "";
      if (on_dev)
        std::snprintf(waits_col, sizeof waits_col, " %6.1f %8.1f %8.1f", static_cast<double>(waits) / iters,
                      1e6 * stats.compress_s / iters, 1e6 * stats.decompress_s / iters);
      const size_t pieces = piece_bounds(mine, opt.piece).size() - 1;
      const std::string alg = std::string(algorithm_name(opt.algorithm)) + (two_level ? " (two-level)" : "") +
                              (!dense && pieces > 1 ? " x" + std::to_string(pieces) : "");
      if (w.rank == 0)
        std::printf("%12lld %-14s %-34s %10.1f %10.3f %10.3f %8.2fx %9.0f%s%s\n", static_cast<long long>(bytes),
                    dense ? "MPI_Allreduce" : p.method.c_str(), alg.c_str(), 1e6 * t, algbw, algbw * 2.0 * (N - 1) / N,
                    dense_time / t, static_cast<double>(stats.bytes_sent) / iters, wire_col, waits_col);
    }
  }
  return 0;
}

int bench_trace(const std::vector<std::string>& args) {
  Flags f("octet bench trace", "",
          {{"spans", "N", "spans per measurement (at most the per-thread cap, 1048576)", "1000000"},
           {"reps", "N", "repetitions; the best time of each is kept", "5"}});
  if (f.parse_or_usage(args)) return 0;
  const int64_t n = f.integer("spans", 1, static_cast<int64_t>(trace::kMaxSpans));
  const int reps = static_cast<int>(f.integer("reps", 1, 1000));
  volatile int64_t sink = 0;
  const double empty = best_time(reps, [&] {
    for (int64_t i = 0; i < n; ++i) sink = sink + i;
  });
  const double off = best_time(reps, [&] {
    for (int64_t i = 0; i < n; ++i) {
      TraceSpan s("bench", nullptr, nullptr, i);
      sink = sink + i;
    }
  });
  trace::set_on(true);
  double on = 1e30;
  for (int r = 0; r < reps; ++r) {  // recording only: the buffer is emptied (and its JSON made) outside the timing
    (void)trace::take_json(0, 0);
    const double t = now_seconds();
    for (int64_t i = 0; i < n; ++i) {
      TraceSpan s("bench", nullptr, nullptr, i);
      sink = sink + i;
    }
    on = std::min(on, now_seconds() - t);
  }
  trace::set_on(false);
  (void)trace::take_json(0, 0);
  std::printf("%-10s %12s %12s\n", "tracing", "ns/span", "vs empty");
  std::printf("%-10s %12.2f %12s\n", "empty", 1e9 * empty / static_cast<double>(n), "1.00x");
  std::printf("%-10s %12.2f %11.2fx\n", "off", 1e9 * off / static_cast<double>(n), off / empty);
  std::printf("%-10s %12.2f %11.2fx\n", "on", 1e9 * on / static_cast<double>(n), on / empty);
  return 0;
}

}  // namespace octet
