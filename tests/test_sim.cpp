// The simulated device's own tests: guarded memory (a host access outside a kernel or a copy ends the process with one
// line naming the last op), queued streams (copies and kernels run only when flushed, in order, a copy's destination
// reads as poison until then, events order streams), poisoned fresh memory, threads bound before page-locked memory,
// and the operand checks of layers, the loss, codecs and the optimizer.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>

#include "compress/codec.h"
#include "core/device.h"
#include "core/error.h"
#include "core/exec.h"
#include "core/launch.h"
#include "core/tensor_ops.h"
#include "core/sim.h"
#include "core/layout.h"
#include "layers/relu.h"
#include "layers/softmax_ce.h"
#include "tests/layer_cases.h"
#include "tests/test_util.h"
#include "optim/optimizer.h"

using namespace octet;
using namespace octet::test;

namespace {

struct ChildResult {
  int status = -1;  // exit status, or 128 + the signal
  std::string err;  // what it wrote on stderr
};

// f in a forked child whose stderr is captured (the fault handler ends the child; f returning exits 0).
ChildResult in_child(const std::function<void()>& f) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    std::freopen("/dev/null", "w", stdout);  // (a test framework's own crash report)
    f();
    _exit(0);
  }
  close(fds[1]);
  ChildResult r;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) r.err.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

std::vector<float> back(const Tensor& t) { return to_vector(t.to(Device::CPU)); }

bool all_poison(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i] != sim::kPoison) return false;
  return true;
}

}  // namespace

TEST_CASE("sim: host code touching device memory outside a kernel ends the process with one line naming the op",
          "[sim][guard]") {
  Exec::sim();
  Tensor t({4}, Device::Sim);  // 16 bytes: one 256-byte allocation
  const ChildResult rd = in_child([&] {
    sim::note("layer fc1 (fc) backward");
    volatile float v = t.data()[2];
    (void)v;
  });
  CHECK(rd.status == 1);
  CHECK_THAT(rd.err, Catch::StartsWith("octet: error: host code read simulated device memory at 0x") &&
                         Catch::Contains("(byte 8 of a 256-byte allocation) outside a kernel or a copy") &&
                         Catch::Contains("last op on this thread: layer fc1 (fc) backward [core/sim_memory.cpp]"));
  CHECK(std::count(rd.err.begin(), rd.err.end(), '\n') == 1);
  const ChildResult wr = in_child([&] { t.data()[0] = 1.f; });
  CHECK(wr.status == 1);
  CHECK_THAT(wr.err, Catch::Contains("host code wrote simulated device memory"));
  // A freed allocation is no live one.
  float* stale = nullptr;
  {
    Tensor gone({4}, Device::Sim);
    stale = gone.data();
  }
  const ChildResult uaf = in_child([&] {
    volatile float v = *stale;
    (void)v;
  });
  CHECK(uaf.status == 1);
  // A null pointer is not device memory: the ordinary crash, not the device's line.
  const ChildResult other = in_child([] {
    volatile float* p = nullptr;
    (void)*p;
  });
  CHECK(other.status == 128 + SIGSEGV);
  CHECK_THAT(other.err, !Catch::Contains("simulated device"));
}

TEST_CASE("sim: inside a kernel device memory is open, and closed again after it", "[sim][guard]") {
  Exec& ex = Exec::sim();
  const sim::Counters before = sim::counters();
  Tensor t({8}, Device::Sim);
  float* p = t.data();
  sim::launch(sim_queue(ex.compute()), "write", [p] {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<float>(i);
  });
  ex.sync(ex.compute());
  CHECK(back(t) == std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(sim::run(sim_queue(ex.compute()), "read", [p] { return p[5]; }) == 5.f);
  const sim::Counters after = sim::counters();
  CHECK(after.kernels - before.kernels == 2);
  CHECK(after.queued - before.queued == 1);
  CHECK(after.protects > before.protects);  // opened and closed around each
  sim::note("the host side of an op");
  CHECK(sim::last_op() == "the host side of an op");
  CHECK(in_child([p] {
          volatile float v = p[5];
          (void)v;
        }).status == 1);
}

TEST_CASE("sim: fresh device memory is poison, a copy's destination is poison until the copy has run",
          "[sim][stream]") {
  Exec& ex = Exec::sim();
  const size_t used = sim::bytes_in_use();
  {
    Buffer<uint8_t> gone(1000, Device::Sim);
    CHECK(sim::bytes_in_use() == used + 1024);
  }
  CHECK(sim::bytes_in_use() == used);  // freed: back to the allocator
  Buffer<uint8_t> b(100, Device::Sim);
  std::vector<uint8_t> h(100, 0);
  copy_sync(Device::Sim, h.data(), b.data(), 100, CopyKind::DeviceToHost);
  CHECK(all_poison(h.data(), 100));

  const Tensor src = random_tensor({64}, 3);
  Tensor d = src.to(Device::Sim);
  std::vector<float> host(64, 0.f);
  copy_async(host.data(), d.data(), 256, CopyKind::DeviceToHost, ex.copy());
  CHECK(sim::pending(sim_queue(ex.copy())) == 1);
  CHECK(all_poison(host.data(), 256));  // read before the sync: poison
  ex.sync(ex.copy());
  CHECK(host == to_vector(src));
}

TEST_CASE("sim: queued kernels and copies run in order when their stream is flushed, and only then", "[sim][stream]") {
  Exec& ex = Exec::sim();
  Tensor d({4}, Device::Sim);
  std::vector<float> one(4, 1.f), seen(4, 0.f);
  float* p = d.data();
  bool ran = false;
  copy_async(p, one.data(), 16, CopyKind::HostToDevice, ex.compute());
  sim::launch(sim_queue(ex.compute()), "double", [p, &ran] {
    for (int i = 0; i < 4; ++i) p[i] *= 2.f;
    ran = true;
  });
  copy_async(seen.data(), p, 16, CopyKind::DeviceToHost, ex.compute());
  CHECK(!ran);
  CHECK(sim::pending(sim_queue(ex.compute())) == 3);
  const Event e = ex.record(ex.compute());
  ex.sync(e);
  CHECK(ran);
  CHECK(seen == std::vector<float>(4, 2.f));
}

TEST_CASE("sim: a kernel reads another stream's copy only after waiting for it", "[sim][stream]") {
  Exec& ex = Exec::sim();
  const Tensor src = random_tensor({32}, 8);
  for (const bool wait : {false, true}) {
    Tensor x({32}, Device::Sim), y({32}, Device::Sim);
    x.copy_from(src, ex.copy());  // the batch, on the copy stream
    if (wait) ex.wait(ex.compute(), ex.record(ex.copy()));
    scale_into(y, x, 1.f, ex);  // compute
    ex.sync(ex.compute());
    const std::vector<float> got = back(y);
    INFO((wait ? "with the wait" : "without it"));
    if (wait) {
      CHECK(got == to_vector(src));
    } else {
      CHECK(std::isnan(got[0]));  // the copy had not run: its destination was poison
    }
    ex.sync(ex.copy());
  }
}

TEST_CASE("sim: an event covers the work queued before it, not after", "[sim][stream]") {
  Exec& ex = Exec::sim();
  const Tensor a = random_tensor({16}, 1), b = random_tensor({16}, 2);
  Tensor da = a.to(Device::Sim), db = b.to(Device::Sim);
  std::vector<float> ha(16), hb(16);
  copy_async(ha.data(), da.data(), 64, CopyKind::DeviceToHost, ex.copy());
  const Event e = ex.record(ex.copy());
  copy_async(hb.data(), db.data(), 64, CopyKind::DeviceToHost, ex.copy());
  ex.sync(e);
  CHECK(ha == to_vector(a));
  CHECK(all_poison(hb.data(), 64));
  ex.sync(ex.copy());
  CHECK(hb == to_vector(b));
}

TEST_CASE("timed events: the device's time between two points of a stream, not the host's", "[sim][stream]") {
  // The simulated device notes when its queue reaches an event: a kernel that sleeps 30 ms between two events shows
  // there, though the host queued them in microseconds. The CPU's events are reached when recorded.
  Exec& ex = Exec::sim();
  const Stream s = ex.compute();
  const Event a = ex.record_timed(s);
  sim::launch(sim_queue(s), "sleep", [] { std::this_thread::sleep_for(std::chrono::milliseconds(30)); });
  const Event b = ex.record_timed(s);
  CHECK(a.timed());
  CHECK(!ex.record(s).timed());
  ex.sync(b);
  CHECK(ex.seconds_between(a, b) >= 0.029);
  const Event c = Exec::host().record_timed(Stream{});
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const Event d = Exec::host().record_timed(Stream{});
  CHECK(Exec::host().seconds_between(c, d) >= 0.009);
  CHECK_THROWS_WITH(ex.seconds_between(a, ex.record(s)), Catch::Contains("two timed events"));
}

TEST_CASE("sim: a later copy of a stream may overwrite what an earlier one still reads", "[sim][stream]") {
  Exec& ex = Exec::sim();
  const Tensor a = random_tensor({16}, 4), b = random_tensor({16}, 5);
  std::vector<float> stage = to_vector(a);
  Tensor up({16}, Device::Sim);
  const Tensor db = b.to(Device::Sim);
  copy_async(up.data(), stage.data(), 64, CopyKind::HostToDevice, ex.comm());  // reads stage later
  copy_async(stage.data(), db.data(), 64, CopyKind::DeviceToHost, ex.comm());  // then overwrites it
  ex.sync(ex.comm());
  CHECK(back(up) == to_vector(a));
  CHECK(stage == to_vector(b));
}

TEST_CASE("sim: an error in a queued kernel surfaces where its stream is synced", "[sim][stream]") {
  Exec& ex = Exec::sim();
  sim::launch(sim_queue(ex.compute()), "failing kernel", [] { OCTET_THROW("a kernel failed"); });
  CHECK_THROWS_WITH(ex.sync(ex.compute()), Catch::Contains("a kernel failed"));
  ex.sync(ex.compute());  // nothing left
}

TEST_CASE("sim: page-locked memory is refused on a thread bound to no device", "[sim][threads]") {
  Exec& ex = Exec::sim();
  std::string unbound, bound;
  std::thread([&] {
    try {
      pinned_free(pinned_alloc(64));
    } catch (const Error& e) {
      unbound = e.what();
    }
    ex.bind_thread();
    try {
      pinned_free(pinned_alloc(64));
    } catch (const Error& e) {
      bound = e.what();
    }
  }).join();
  CHECK_THAT(unbound, Catch::Contains("thread bound to no device"));
  CHECK(bound.empty());
}

TEST_CASE("sim: every layer, the loss, codecs and the optimizer name an operand on the wrong device", "[sim][checks]") {
  Exec& ex = Exec::sim();
  Relu relu("relu1");
  relu.bind(ex);
  Tensor host({2, 3}), dev({2, 3}, Device::Sim);
  CHECK_THROWS_WITH(relu.forward(host, dev, {}),
                    Catch::Contains("layer relu1 (relu) forward: the input [2,3] is on cpu, the layer runs on sim"));
  CHECK_THROWS_WITH(relu.backward(dev, dev, host, &dev),
                    Catch::Contains("layer relu1 (relu) backward: the output gradient [2,3] is on cpu"));

  SoftmaxCrossEntropy loss;
  Tensor logits({2, 3}, Device::Sim);
  std::vector<int32_t> labels = {0, 1};
  CHECK_THROWS_WITH(loss.forward(logits, labels.data(), ex), Catch::Contains("the labels are not in sim memory"));
  Buffer<int32_t> dlab(2, Device::Sim);
  copy_sync(Device::Sim, dlab.data(), labels.data(), 8, CopyKind::HostToDevice);
  loss.forward(logits, dlab.data(), ex);
  Tensor dlogits({2, 3});  // on the host: the defect the simulated device exists to catch
  CHECK_THROWS_WITH(loss.backward(dlogits, 0.5f, ex),
                    Catch::Contains("softmax_ce backward: dlogits [2,3] is on cpu, the loss runs on sim"));

  CodecParams cp;
  cp.method = "dynamic_tree8";
  const CodecPtr c = make_codec(cp);
  Buffer<uint8_t> out(c->max_bytes(6), Device::Sim);
  CHECK_THROWS_WITH(c->encode(span_of(std::as_const(host)), {out.data(), out.size(), Device::Sim}, {}, ex),
                    Catch::Contains("dynamic_tree8 encoder: input on cpu"));

  Tensor w({4}, Device::Sim), g({4});
  Optimizer opt(OptimizerConfig{}, {{"w", &w, &g}}, ex);
  CHECK_THROWS_WITH(opt.step(0.1f), Catch::Contains("optimizer: w is on sim, its gradient on cpu"));
}

TEST_CASE("sim: a relayout pass that throws on the host leaves the device thread's layouts as they were",
          "[sim][layout]") {
  // A synchronized batchnorm's backward checks for a training forward on the host, inside the plain pass that its
  // channels-last operands take on the simulated device; the pass's markers on the device thread must still balance.
  Exec& ex = Exec::sim();
  const LayerCase* c = nullptr;
  for (const LayerCase& k : layer_cases())
    if (k.name == "batchnorm, sync: true, 16 channels of 5x5 (channel blocks)") c = &k;
  REQUIRE(c != nullptr);
  LayerPtr l = c->make();
  if (c->prepare) c->prepare(*l);
  l->bind(ex);
  l->set_math({Precision::Bf16});
  l->set_layout({kNhwc, kNhwc, 0});
  const Shape s = c->input().shape();
  Tensor x(s, Device::Sim, DType::Bf16), y(s, Device::Sim, DType::Bf16), dy(s, Device::Sim, DType::Bf16),
      dx(s, Device::Sim, DType::Bf16);
  CHECK_THROWS_WITH(l->backward(x, y, dy, &dx), Catch::Contains("needs a training forward"));
  int seen = 0;
  Layer* lp = l.get();
  sim::launch(sim_queue(ex.compute()), "probe", [lp, &seen] { seen = lp->layout().in; });
  ex.sync(ex.compute());
  CHECK(seen == kNhwc);
}
