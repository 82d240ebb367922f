// Device parity tests, built twice: against a GPU (octet_cuda_tests: the CUDA twins) and against the simulated device
// (octet_sim_tests, in every CI run: the GPU path's host-side orchestration with the CPU twins as kernels). Every case
// of the layer table, every case of the codec table (payload bytes, decodes, error feedback, the fused owner step,
// hostile payloads), PowerSGD's algebra, auto's candidate timings, and the device plumbing against the CPU
// (the step's own kernels: test_device_step.cpp; channels-last bf16 activations: test_device_layout.cpp). The CUDA
// build exits 77 (CTest: skipped) with a message when no GPU is visible.
#define CATCH_CONFIG_RUNNER
#include <cstdio>
#include <cstring>
#include <limits>
#include <tuple>

#include "comm/auto_plan.h"
#include "compress/codec.h"
#include "compress/codec_device.h"
#include "compress/powersgd.h"
#include "core/device.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/exec.h"
#include "core/launch.h"
#include "core/tensor_ops.h"
#include "layers/relu.h"
#include "tests/codec_cases.h"
#include "tests/layer_cases.h"
#include "tests/device_util.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

int main(int argc, char** argv) {
  if (kDev == Device::CUDA && cuda_device_count() == 0) {
    std::printf("no CUDA device visible (%s): skipping the CUDA parity tests\n", cuda_unavailable_reason());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}

TEST_CASE("tensor copies host -> device -> host, on streams and synchronously", "[cuda]") {
  Exec& ex = dev();
  Tensor h = random_tensor({1000, 3}, 1);
  Tensor d = h.to(kDev);
  CHECK(d.device() == kDev);
  CHECK(to_vector(d.to(Device::CPU)) == to_vector(h));
  Tensor pinned = Tensor::pinned({1000, 3});
  CHECK(pinned.is_pinned());
  pinned.copy_from(d, ex.copy());
  ex.sync(ex.copy());
  CHECK(to_vector(pinned) == to_vector(h));
  d.zero(ex.compute());
  ex.sync(ex.compute());
  CHECK(to_vector(d.to(Device::CPU)) == std::vector<float>(3000, 0.f));
}

TEST_CASE("device memory accounting: a tensor's bytes count while it lives and the peak keeps the most", "[cuda]") {
  dev();
  const size_t before = device_bytes_in_use(kDev);
  {
    Tensor a({1 << 20}, kDev);  // 4 MiB
    CHECK(device_bytes_in_use(kDev) == before + (size_t{4} << 20));
    a = Tensor({1 << 18}, kDev);  // the old buffer freed: 1 MiB
    CHECK(device_bytes_in_use(kDev) == before + (size_t{1} << 20));
    CHECK(device_peak_bytes(kDev) >= before + (size_t{4} << 20));
  }
  // Freed: (a CUDA tensor once left its bytes counted forever, and peaks ran past the card's memory.)
  CHECK(device_bytes_in_use(kDev) == before);
}

TEST_CASE("every case of the layer table: the CUDA twin matches the CPU forward and backward", "[cuda][parity]") {
  Exec& ex = dev();
  const StepContext ctx{true, 7, 3, 0};
  for (const LayerCase& c : layer_cases()) {
    INFO(c.name << " (parity tolerance " << c.parity << ")");
    LayerPtr cpu = c.make(), gpu = c.make();  // the same seeded parameters
    if (kDev == Device::CUDA) REQUIRE(gpu->has_cuda());
    gpu->bind(ex);
    const Tensor x = c.input();
    const Tensor xd = x.to(kDev);
    const Tensor s = c.skip_input ? c.skip_input() : Tensor(Shape{0});
    const Tensor sd = s.to(kDev);
    Tensor ds(s.shape()), dsd(s.shape(), kDev);
    if (c.skip_input) cpu->bind_skip(&s, &ds), gpu->bind_skip(&sd, &dsd);
    Tensor y(cpu->output_shape(x.shape())), yd(y.shape(), kDev);
    cpu->forward(x, y, ctx);
    gpu->forward(xd, yd, ctx);
    ex.sync(ex.compute());
    check_close(yd, y, c.parity, "forward");
    const Tensor dy = random_tensor(y.shape(), 99);
    const Tensor dyd = dy.to(kDev);
    Tensor dx(x.shape()), dxd(x.shape(), kDev);
    cpu->backward(x, y, dy, &dx);
    gpu->backward(xd, yd, dyd, &dxd);
    ex.sync(ex.compute());
    check_close(dxd, dx, c.parity, "dx");
    if (c.skip_input) check_close(dsd, ds, c.parity, "dskip");
    auto pc = cpu->params(), pg = gpu->params();
    REQUIRE(pc.size() == pg.size());
    for (size_t k = 0; k < pc.size(); ++k) check_close(*pg[k].grad, *pc[k].grad, c.parity, pc[k].name + " grad");
    auto sc = cpu->state(), sg = gpu->state();  // running statistics after one training forward
    REQUIRE(sc.size() == sg.size());
    for (size_t k = 0; k < sc.size(); ++k) check_close(*sg[k].second, *sc[k].second, c.parity, sc[k].first);
    const StepContext eval{false, 7, 3, 0};
    cpu->forward(x, y, eval);
    gpu->forward(xd, yd, eval);
    ex.sync(ex.compute());
    check_close(yd, y, c.parity, "evaluation forward");
  }
}

TEST_CASE("mixed precision: conv and fc in tf32, bf16 and fp16 are the fp32 twin on operands rounded to the format",
          "[cuda][parity][precision]") {
  // The reference: the CPU twin in fp32 on x, weights and dy rounded to the format (round_to), its results rounded
  // too; the simulated device is that model exactly, a GPU (16-bit tensors, fp32 accumulation, the bias in fp32)
  // within the format's rounding.
  Exec& ex = dev();
  const StepContext ctx{true, 7, 3, 0};
  for (const LayerCase& c : layer_cases()) {
    const std::string kind = c.make()->kind();
    if (kind != "conv" && kind != "fc") continue;
    for (Precision p : {Precision::Tf32, Precision::Bf16, Precision::Fp16}) {
      const double tol = kDev == Device::Sim ? 0 : p == Precision::Fp16 ? 4e-3 : 2e-2;
      INFO(c.name << " in " << precision_name(p) << " (tolerance " << tol << ")");
      LayerPtr cpu = c.make(), gpu = c.make();
      gpu->set_math({p});
      gpu->bind(ex);
      for (Param& q : cpu->params())  // the weights as the device reads them (the bias stays fp32)
        if (q.name.size() > 7 && q.name.substr(q.name.size() - 7) == ".weight")
          round_to_cpu(p, q.value->data(), q.value->data(), q.value->numel());
      const Tensor x = c.input();
      Tensor xr = x;
      round_to_cpu(p, xr.data(), xr.data(), xr.numel());
      const Tensor xd = x.to(kDev);  // (a queued kernel reads its operands when it runs: no temporaries)
      Tensor y(cpu->output_shape(x.shape())), yd(y.shape(), kDev);
      cpu->forward(xr, y, ctx);
      round_to_cpu(p, y.data(), y.data(), y.numel());
      gpu->forward(xd, yd, ctx);
      ex.sync(ex.compute());
      check_close(yd, y, tol, "forward");
      const Tensor dy = random_tensor(y.shape(), 99);
      Tensor dyr = dy;
      round_to_cpu(p, dyr.data(), dyr.data(), dyr.numel());
      const Tensor dyd = dy.to(kDev);
      Tensor dx(x.shape()), dxd(x.shape(), kDev);
      cpu->backward(xr, y, dyr, &dx);
      gpu->backward(xd, yd, dyd, &dxd);
      ex.sync(ex.compute());
      round_to_cpu(p, dx.data(), dx.data(), dx.numel());
      check_close(dxd, dx, tol, "dx");
      auto pc = cpu->params(), pg = gpu->params();
      for (size_t k = 0; k < pc.size(); ++k) {
        Tensor& g = *pc[k].grad;
        if (pc[k].name.substr(pc[k].name.size() - 7) == ".weight") round_to_cpu(p, g.data(), g.data(), g.numel());
        check_close(*pg[k].grad, g, kDev == Device::Sim ? 0 : 2e-2, pc[k].name + " grad");
      }
    }
  }
}

TEST_CASE("copy_rows across devices and the elementwise kernels match their host twins", "[cuda][parity]") {
  Exec& ex = dev();
  const Tensor src = random_tensor({5, 8}, 11);  // [5, 8]
  Tensor want({4, 6});                           // [4, 6]
  copy_rows(want, 2, 6, src, 8 + 1, 8, 4, 3, Exec::host().copy());
  const Tensor dsrc = src.to(kDev);
  Tensor ddst({4, 6}, kDev);
  ddst.zero(ex.copy());
  copy_rows(ddst, 2, 6, dsrc, 8 + 1, 8, 4, 3, ex.copy());  // device -> device
  ex.sync(ex.copy());
  check_close(ddst, want, 0, "copy_rows device to device");
  Tensor pinned = Tensor::pinned({4, 6});
  copy_rows(pinned, 2, 6, dsrc, 8 + 1, 8, 4, 3, ex.copy());  // device -> host
  ex.sync(ex.copy());
  CHECK(to_vector(pinned) == to_vector(want));
  Tensor back({4, 6}, kDev);
  back.zero(ex.copy());
  copy_rows(back, 0, 6, pinned, 0, 6, 4, 6, ex.copy());  // host -> device
  ex.sync(ex.copy());
  check_close(back, want, 0, "copy_rows host to device");

  Tensor acc = random_tensor({1001}, 12), x = random_tensor({1001}, 13);
  Tensor dacc = acc.to(kDev);
  add_into(dacc, x.to(kDev), ex);
  add_into(acc, x, Exec::host());
  Tensor dscaled({1001}, kDev), scaled({1001});
  scale_into(dscaled, dacc, 0.125f, ex);
  scale_into(scaled, acc, 0.125f, Exec::host());
  ex.sync(ex.compute());
  check_close(dacc, acc, 0, "add_into");
  check_close(dscaled, scaled, 0, "scale_into");

  // The ReLU twin a layer with a fused ReLU calls (the mask of dy by the output).
  const Tensor z = random_tensor({1001}, 14), g = random_tensor({1001}, 15);
  Tensor m({1001});
  relu_mask_cpu(z.data(), g.data(), m.data(), g.numel(), Exec::host().compute());
  Tensor dm({1001}, kDev);
  const Tensor dz = z.to(kDev), dg = g.to(kDev);
  launch_twin("relu_mask", relu_mask_cpu, OCTET_CUDA_TWIN(relu_mask_cuda), ex.compute(),
              static_cast<const float*>(dz.data()), dg.data(), dm.data(), dm.numel());
  ex.sync(ex.compute());
  check_close(dm, m, 0, "relu_mask");
}

TEST_CASE("powersgd's products and Gram-Schmidt on the device match the CPU (the simulated device: bit for bit)",
          "[cuda][parity][powersgd]") {
  Exec& ex = dev();
  const double tol = kDev == Device::Sim ? 0 : 1e-5;  // cuBLAS and a block's sums add in other orders
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      const int64_t m = 300, n = 4, k = 777;  // P = M Q's shape, and its transposes
      const Tensor a = ta ? random_tensor({k, m}, 21) : random_tensor({m, k}, 21);
      const Tensor b = tb ? random_tensor({n, k}, 22) : random_tensor({k, n}, 22);
      Tensor want({m, n}), got({m, n}, kDev);
      lowrank_gemm_cpu(a.data(), b.data(), want.data(), m, n, k, ta, tb, Stream{});
      const Tensor da = a.to(kDev), db = b.to(kDev);
      lowrank_gemm(ex, da.data(), db.data(), got.data(), m, n, k, ta, tb);
      ex.sync(ex.comm());
      check_close(got, want, tol, std::string("gemm trans_a ") + (ta ? "1" : "0") + " trans_b " + (tb ? "1" : "0"));
    }
  for (const auto& [rows, r] : {std::pair<int64_t, int>{1000, 4}, {3, 3}, {5000, 1}}) {
    Tensor p = random_tensor({rows, r}, 23);
    Tensor dp = p.to(kDev);
    orthogonalize_cpu(p.data(), rows, r, 1e-8f, Stream{});
    orthogonalize(ex, dp.data(), rows, r, 1e-8f);
    ex.sync(ex.comm());
    check_close(dp, p, tol, "orthogonalize " + std::to_string(rows) + " x " + std::to_string(r));
  }
}

TEST_CASE("auto times its candidates on the device: codec speeds, payload ratios, powersgd's products",
          "[cuda][auto]") {
  Exec& ex = dev();
  for (const char* c : {"none", "fp8_e4m3", "qsgd4", "topk"}) {
    INFO(c);
    const CandidateCost k = measure_candidate(c, {}, 20000, ex);
    CHECK(k.codec.encode_gbs > 0);
    CHECK(k.codec.decode_gbs > 0);
    CHECK(k.codec.ratio_fc > 0);
    CHECK(k.codec.ratio_fc <= 1.001);
  }
  CHECK(measure_candidate("fp8_e4m3", {}, 20000, ex).codec.ratio_fc < 0.27);
  CHECK(measure_candidate("powersgd", {}, 20000, ex).gemm_gflops > 0);
}

namespace {

const int64_t kSizes[] = {0, 1, 7, 1000, 4097, 4098, 65537, 300001};  // (empty; tails of 1, 2, 3 values past 4k)

// Gradient-like values with exact zeros and repeated magnitudes (ties for topk, equal maxima for the scales).
std::vector<float> gradient(int64_t n, uint64_t seed) {
  Rng r(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    const float u = r.uniform();
    x = u < 0.05f ? 0.f : u < 0.1f ? (r.uniform() < 0.5f ? 0.25f : -0.25f) : 1e-2f * r.normal() * std::exp(r.normal());
  }
  return v;
}

template <typename T>
Buffer<T> device_copy(const std::vector<T>& h) {
  Buffer<T> d(h.size(), kDev);
  if (!h.empty()) copy_sync(kDev, d.data(), h.data(), h.size() * sizeof(T), CopyKind::HostToDevice);
  return d;
}
template <typename T>
std::vector<T> host_copy(const T* d, size_t n) {
  std::vector<T> h(n);
  if (n) copy_sync(kDev, h.data(), d, n * sizeof(T), CopyKind::DeviceToHost);
  return h;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

std::string case_name(const CodecCase& c, int64_t n) { return c.name + ", n " + std::to_string(n); }

}  // namespace

TEST_CASE("every codec: GPU payloads are the CPU's bytes, and each side decodes the other's bit-exactly",
          "[cuda][codec][parity]") {
  Exec& ex = dev();
  for (const CodecCase& cc : codec_cases())
    for (const int64_t n : kSizes) {
      INFO(case_name(cc, n));
      const CodecPtr c = make_codec(cc.params);
      const std::vector<float> x = gradient(n, 17 + static_cast<uint64_t>(n));
      const std::vector<float> fresh = gradient(n, 99);
      const EncodeContext host_ctx{0xabcdef12345ull, fresh.data()};
      std::vector<uint8_t> cpu(c->max_bytes(n));
      cpu.resize(c->encode(x.data(), n, cpu.data(), host_ctx));
      Buffer<float> dx = device_copy(x), dfresh = device_copy(fresh);
      Buffer<uint8_t> dout(c->max_bytes(n), kDev);
      const size_t gb =
          c->encode({dx.data(), x.size(), kDev}, {dout.data(), dout.size(), kDev}, {host_ctx.seed, dfresh.data()}, ex);
      ex.sync(ex.comm());
      REQUIRE(gb == cpu.size());
      CHECK(host_copy(dout.data(), gb) == cpu);
      for (const bool acc : {false, true}) {
        std::vector<float> want(x.size(), 0.5f);
        c->decode(cpu.data(), cpu.size(), want.data(), n, acc);
        Buffer<float> dy = device_copy(std::vector<float>(x.size(), 0.5f));
        Buffer<uint8_t> din = device_copy(cpu);
        c->decode({din.data(), din.size(), kDev}, {dy.data(), dy.size(), kDev}, acc, ex);
        ex.sync(ex.comm());
        CHECK(same_bits(host_copy(dy.data(), dy.size()), want));
      }
    }
}

TEST_CASE("every codec: error feedback and the owner step on the GPU match the CPU over steps",
          "[cuda][codec][parity]") {
  Exec& ex = dev();
  for (const CodecCase& cc : codec_cases()) {
    const int64_t n = 20000;
    INFO(case_name(cc, n));
    const CodecPtr c = make_codec(cc.params);
    std::vector<float> residual(n, 0.f), scratch(3 * n);
    Buffer<float> dres = device_copy(residual), dscratch(3 * n, kDev);
    for (uint64_t step = 0; step < 3; ++step) {
      const std::vector<float> g = gradient(n, 1000 + step);
      std::vector<uint8_t> cpu(c->max_bytes(n));
      cpu.resize(encode_with_feedback(*c, g.data(), n, residual.data(), cpu.data(), step, scratch.data()));
      Buffer<float> dg = device_copy(g);
      Buffer<uint8_t> dout(c->max_bytes(n), kDev);
      const size_t gb = encode_with_feedback(*c, {dg.data(), g.size(), kDev}, dres.data(),
                                             {dout.data(), dout.size(), kDev}, step, dscratch.data(), ex);
      ex.sync(ex.comm());
      REQUIRE(gb == cpu.size());
      CHECK(host_copy(dout.data(), gb) == cpu);
      CHECK(same_bits(host_copy(dres.data(), residual.size()), residual));
    }
    if (c->sparse()) continue;  // sparse codecs are gathered, never re-encoded by an owner
    // The owner step: three ranks' payloads of one chunk, summed and re-encoded with the owner's residual.
    std::vector<std::vector<uint8_t>> parts;
    std::vector<Buffer<uint8_t>> dparts;
    for (int q = 0; q < 3; ++q) {
      const std::vector<float> g = gradient(n, 500 + q);
      std::vector<uint8_t> p(c->max_bytes(n));
      p.resize(c->encode(g.data(), n, p.data(), {7, nullptr}));
      dparts.push_back(device_copy(p));
      parts.push_back(std::move(p));
    }
    std::vector<Span<const uint8_t>> hs, ds;
    for (int q = 0; q < 3; ++q) {
      hs.push_back({parts[q].data(), parts[q].size(), Device::CPU});
      ds.push_back({dparts[q].data(), parts[q].size(), kDev});
    }
    std::vector<float> owner(n, 0.125f);
    Buffer<float> downer = device_copy(owner);
    std::vector<uint8_t> cpu(c->max_bytes(n));
    const size_t cb =
        c->reduce_encode(hs, n, owner.data(), {cpu.data(), cpu.size(), Device::CPU}, 11, scratch.data(), Exec::host());
    Buffer<uint8_t> dout(c->max_bytes(n), kDev);
    const size_t gb = c->reduce_encode(ds, n, downer.data(), {dout.data(), dout.size(), kDev}, 11, dscratch.data(), ex);
    ex.sync(ex.comm());
    REQUIRE(gb == cb);
    cpu.resize(cb);
    CHECK(host_copy(dout.data(), gb) == cpu);
    CHECK(same_bits(host_copy(downer.data(), owner.size()), owner));
  }
}

TEST_CASE("GPU decoders reject hostile payloads naming the offset, GPU encoders reject NaN", "[cuda][codec][hostile]") {
  Exec& ex = dev();
  for (const CodecCase& cc : codec_cases()) {
    const int64_t n = 5000;
    INFO(case_name(cc, n));
    const CodecPtr c = make_codec(cc.params);
    std::vector<float> x = gradient(n, 3);
    std::vector<uint8_t> good(c->max_bytes(n));
    good.resize(c->encode(x.data(), n, good.data(), {1, nullptr}));
    Buffer<float> dy(n, kDev);
    auto gpu_decode = [&](const std::vector<uint8_t>& p) {
      Buffer<uint8_t> d = device_copy(p);
      c->decode({d.data(), p.size(), kDev}, {dy.data(), dy.size(), kDev}, false, ex);
      ex.sync(ex.comm());
    };
    // Truncated by a byte, and a wrong codec id: the header/size checks both decoders share.
    std::vector<uint8_t> shorter(good.begin(), good.end() - 1);
    CHECK_THROWS_WITH(gpu_decode(shorter), Catch::Contains("payload"));
    std::vector<uint8_t> wrong = good;
    wrong[0] ^= 0x7f;
    CHECK_THROWS_WITH(gpu_decode(wrong), Catch::Contains("offset 0"));
    // A NaN or an infinity where the case's payload keeps a value or scale.
    for (const size_t at : cc.finite_at)
      for (const uint32_t bits : cc.nonfinite) {
        INFO("0x" << std::hex << bits << " at offset " << std::dec << at);
        std::vector<uint8_t> bad = good;
        std::memcpy(bad.data() + at, &bits, static_cast<size_t>(cc.finite_bytes));  // little-endian: the low bytes
        bool cpu_threw = false;
        std::vector<float> host(n);
        try {
          c->decode(bad.data(), bad.size(), host.data(), n, false);
        } catch (const Error&) {
          cpu_threw = true;
        }
        if (cpu_threw) CHECK_THROWS_WITH(gpu_decode(bad), Catch::Contains("offset"));
      }
    x[n / 2] = std::numeric_limits<float>::infinity();
    Buffer<float> dx = device_copy(x);
    Buffer<uint8_t> dout(c->max_bytes(n), kDev);
    CHECK_THROWS_AS(c->encode({dx.data(), x.size(), kDev}, {dout.data(), dout.size(), kDev}, {1, nullptr}, ex),
                    NonFiniteError);
  }
  // Sparse payloads: an index out of order (topk), an overlong varint and trailing bytes (adacomp).
  CodecParams tp;
  tp.method = "topk";
  const CodecPtr topk = make_codec(tp);
  std::vector<float> x = gradient(5000, 4);
  std::vector<uint8_t> p(topk->max_bytes(5000));
  p.resize(topk->encode(x.data(), 5000, p.data(), {}));
  std::swap_ranges(p.begin() + kHeaderBytes, p.begin() + kHeaderBytes + 4, p.begin() + kHeaderBytes + 8);
  Buffer<uint8_t> dp = device_copy(p);
  Buffer<float> dy(5000, kDev);
  CHECK_THROWS_WITH(topk->decode({dp.data(), p.size(), kDev}, {dy.data(), 5000, kDev}, false, ex),
                    Catch::Contains("offset 20"));
  CodecParams ap;
  ap.method = "adacomp", ap.bin = 50;
  const CodecPtr ada = make_codec(ap);
  std::vector<uint8_t> q(ada->max_bytes(5000));
  q.resize(ada->encode(x.data(), 5000, q.data(), {}));
  std::vector<uint8_t> trailing = q;
  trailing.push_back(0);
  Buffer<uint8_t> dt = device_copy(trailing);
  CHECK_THROWS_WITH(ada->decode({dt.data(), trailing.size(), kDev}, {dy.data(), 5000, kDev}, false, ex),
                    Catch::Contains("offset " + std::to_string(q.size())));
  // Its count (read on the device, not the host): more values than the payload holds, more than n, none, and one
  // fewer than it holds.
  uint32_t real;
  std::memcpy(&real, q.data() + 8, 4);
  const uint32_t over_n = 5001;  // (the payload's bytes would hold it: the count check against n)
  std::vector<uint8_t> roomy = q;
  roomy.resize(kHeaderBytes + 4 + over_n, 0);
  for (const auto& [count, payload, what] : std::vector<std::tuple<uint32_t, const std::vector<uint8_t>*, const char*>>{
           {uint32_t{1} << 30, &q, "offset 8"},
           {over_n, &roomy, "offset 8"},
           {0, &q, "bytes after the last"},
           {real - 1, &q, "bytes after the last"}}) {
    INFO("count " << count);
    std::vector<uint8_t> c = *payload;
    std::memcpy(c.data() + 8, &count, 4);
    Buffer<uint8_t> dc = device_copy(c);
    CHECK_THROWS_WITH(ada->decode({dc.data(), c.size(), kDev}, {dy.data(), 5000, kDev}, false, ex),
                      Catch::Contains(what));
  }
  std::vector<uint8_t> overlong = q;
  for (size_t i = kHeaderBytes + 4; i < kHeaderBytes + 11 && i < overlong.size(); ++i) overlong[i] |= 0x80;
  Buffer<uint8_t> dl = device_copy(overlong);
  CHECK_THROWS_WITH(ada->decode({dl.data(), overlong.size(), kDev}, {dy.data(), 5000, kDev}, false, ex),
                    Catch::Contains("offset 16"));
}

TEST_CASE("fp16 and bf16 on the device off the 16-byte grid: the one-value kernels give the CPU's bytes and floats",
          "[cuda][codec]") {
  Exec& ex = dev();
  const int64_t n = 1001;
  const std::vector<float> x = gradient(n, 7);
  std::vector<float> shifted(n + 1, 0.f);  // x one float in: 4 bytes off the 16-byte grid
  std::copy(x.begin(), x.end(), shifted.begin() + 1);
  Buffer<float> dx = device_copy(shifted);
  for (const char* m : {"fp16", "bf16"}) {
    INFO(m);
    CodecParams p;
    p.method = m;
    const CodecPtr c = make_codec(p);
    std::vector<uint8_t> cpu(c->max_bytes(n));
    cpu.resize(c->encode(x.data(), n, cpu.data(), {1, nullptr}));
    std::vector<float> ref(n);
    c->decode(cpu.data(), cpu.size(), ref.data(), n, false);
    Buffer<uint8_t> dout(cpu.size() + 2, kDev);  // the payload 2 bytes in: off the 4-byte grid
    const size_t bytes =
        c->encode({dx.data() + 1, static_cast<size_t>(n), kDev}, {dout.data() + 2, cpu.size(), kDev}, {1, nullptr}, ex);
    ex.sync(ex.comm());
    REQUIRE(bytes == cpu.size());
    CHECK(host_copy(dout.data() + 2, bytes) == cpu);
    Buffer<float> dy(n + 1, kDev);
    c->decode({dout.data() + 2, bytes, kDev}, {dy.data() + 1, static_cast<size_t>(n), kDev}, false, ex);
    ex.sync(ex.comm());
    CHECK(same_bits(host_copy(dy.data() + 1, static_cast<size_t>(n)), ref));
  }
}

TEST_CASE("an exchange's codec ops on the device: one wait for all, the first fault thrown at the end, by offset",
          "[cuda][codec][hostile]") {
  Exec& ex = dev();
  const int64_t n = 5000;
  CodecParams p;
  p.method = "dynamic_tree8";
  const CodecPtr c = make_codec(p);
  std::vector<float> x = gradient(n, 5);
  std::vector<uint8_t> good(c->max_bytes(n));
  good.resize(c->encode(x.data(), n, good.data(), {1, nullptr}));
  std::vector<uint8_t> other = good;  // the header's block size (offset 8) 1000: another configuration's payload
  const uint32_t block1000 = 1000;
  std::memcpy(other.data() + 8, &block1000, 4);
  std::vector<uint8_t> nan_scale = good;  // the first block's scale a NaN
  const uint32_t nan_bits = 0x7fc00000u;
  std::memcpy(nan_scale.data() + kHeaderBytes, &nan_bits, 4);
  Buffer<uint8_t> dg = device_copy(good), dother = device_copy(other), dnan = device_copy(nan_scale);
  Buffer<float> dy(n, kDev);
  auto decode = [&](const Buffer<uint8_t>& b) {
    c->decode({b.data(), good.size(), kDev}, {dy.data(), dy.size(), kDev}, true, ex);
  };
  // A GPU (and the emulated one) reports at finish(); the simulated device runs the CPU decoder, which throws at once.
  const bool gpu = kDev == Device::CUDA;
  decode(dg);  // (the code book's first use copies it to the device)
  {
    const uint64_t w0 = device_host_waits();
    CodecChecksDeferred checks(ex);
    for (int k = 0; k < kStatusSlots + 10; ++k) decode(dg);  // more ops than status records: one wait when they fill
    checks.finish();
    if (gpu) CHECK(device_host_waits() - w0 == 2);
  }
  auto faulty = [&](std::vector<const Buffer<uint8_t>*> order) {
    CodecChecksDeferred checks(ex);
    for (const auto* b : order) decode(*b);
    checks.finish();
  };
  // The first faulty op's error: another configuration's header (decoded from the device, no wait), a NaN scale.
  CHECK_THROWS_WITH(faulty({&dg, &dother, &dnan, &dg}),
                    Catch::Contains(gpu ? "dynamic_tree8 payload: the header byte at offset 8" : "blocks of 1000"));
  CHECK_THROWS_WITH(faulty({&dg, &dnan, &dother}),
                    Catch::Contains("dynamic_tree8 payload: bad scale") && Catch::Contains("offset 12"));
  if (gpu) {  // nothing thrown before finish()
    CodecChecksDeferred checks(ex);
    CHECK_NOTHROW(decode(dnan));
    CHECK_THROWS_WITH(checks.finish(), Catch::Contains("offset 12"));
  }
  CHECK_NOTHROW(faulty({&dg}));  // a scope after a fault starts clean
  {
    CodecChecksDeferred left(ex);  // left without finish(): its records are dropped
    decode(dg);
  }
  // An encoder's NaN or infinity: NonFiniteError naming the value's index.
  x[n / 2] = std::numeric_limits<float>::infinity();
  Buffer<float> dx = device_copy(x);
  Buffer<uint8_t> dout(c->max_bytes(n), kDev);
  auto encode = [&] {
    CodecChecksDeferred checks(ex);
    c->encode({dx.data(), x.size(), kDev}, {dout.data(), dout.size(), kDev}, {1, nullptr}, ex);
    checks.finish();
  };
  CHECK_THROWS_AS(encode(), NonFiniteError);
  CHECK_THROWS_WITH(encode(), Catch::Contains("input value " + std::to_string(n / 2) + " is"));
}

TEST_CASE(
    "16-bit gradient sums on the device: both kernels (8 values a thread, and one a thread for a length or an "
    "address off the 16-byte grid) are the host's sums bit for bit",
    "[cuda][add_into]") {
  Exec& ex = dev();
  for (const int64_t n : {1000, 1001}) {
    INFO("n " << n);
    std::vector<bf16_t> acc(static_cast<size_t>(n)), x(static_cast<size_t>(n));
    Rng r(static_cast<uint64_t>(n));
    for (size_t i = 0; i < acc.size(); ++i) acc[i] = float_to_bf16(r.normal()), x[i] = float_to_bf16(r.normal());
    Buffer<bf16_t> dacc = device_copy(acc), dx = device_copy(x);
    launch_twin("add_into (16-bit)", add_into16_cpu<bf16_t>, OCTET_CUDA_TWIN(add_into16_cuda<bf16_t>), ex.compute(),
                dacc.data(), static_cast<const bf16_t*>(dx.data()), n);
    add_into16_cpu(acc.data(), static_cast<const bf16_t*>(x.data()), n, Exec::host().compute());
    ex.sync(ex.compute());
    const std::vector<bf16_t> back = host_copy(dacc.data(), acc.size());
    CHECK(std::memcmp(back.data(), acc.data(), acc.size() * sizeof(bf16_t)) == 0);
  }
}
