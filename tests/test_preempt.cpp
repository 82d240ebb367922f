// The stop request's guard: signals sent to the process while oneDNN's JIT GEMM runs (which points the stack pointer
// into the heap, oneDNN issue #4845) are taken by the guard's own thread, so the heap stays whole and the stop is
// seen; the guard gives the thread its signal mask back.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <dnnl.hpp>
#include <memory>
#include <thread>
#include <vector>

#include "trainer/preempt.h"

using namespace octet;

namespace {

bool blocked_here(int sig) {
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, nullptr, &now);
  return sigismember(&now, sig) == 1;
}

}  // namespace

TEST_CASE("stop signals during oneDNN's GEMM reach the guard's thread and leave the heap whole", "[preempt]") {
  REQUIRE_FALSE(blocked_here(SIGUSR1));
  {
    PreemptGuard guard;
    CHECK(blocked_here(SIGUSR1));
    CHECK(blocked_here(SIGTERM));
    CHECK(stop_signal() == 0);
    // An fc layer's forward as oneDNN runs it (x64:gemm:jit where the CPU has AVX-512), [16, 1600] x [64, 1600]^T.
    using namespace dnnl;
    engine e(engine::kind::cpu, 0);
    stream s(e);
    const memory::desc src({16, 1600}, memory::data_type::f32, memory::format_tag::ab);
    const memory::desc w({64, 1600}, memory::data_type::f32, memory::format_tag::ab);
    const memory::desc b({64}, memory::data_type::f32, memory::format_tag::a);
    const memory::desc dst({16, 64}, memory::data_type::f32, memory::format_tag::ab);
    inner_product_forward ip(inner_product_forward::primitive_desc(
        inner_product_forward::desc(prop_kind::forward_training, src, w, b, dst), e));
    std::vector<float> xs(16 * 1600, 1.0f), ws(64 * 1600, 0.01f), bs(64, 0.5f), ds(16 * 64);
    memory ms(src, e, xs.data()), mw(w, e, ws.data()), mb(b, e, bs.data()), md(dst, e, ds.data());
    std::atomic<bool> done{false};
    const pid_t me = getpid();
    int sent = 0;
    std::thread sender([&] {  // process-directed signals, as kill, mpirun and Slurm send them
      for (; sent < 4000 && !done; ++sent) kill(me, sent % 2 ? SIGUSR1 : SIGTERM), usleep(20);
    });
    int bad = 0;
    for (int it = 0; it < 40000 && !done; ++it) {
      auto churn = std::make_unique<std::vector<float>>(static_cast<size_t>(64 + it % 97));  // heap traffic to trip on
      ip.execute(s, {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST, md}});
      s.wait();
      if (!(ds[5] > 16.49f && ds[5] < 16.51f)) ++bad;  // 1600 x 0.01 + 0.5
      if (sent >= 4000) done = true;
    }
    done = true;
    sender.join();
    CHECK(bad == 0);
    CHECK((stop_signal() == SIGTERM || stop_signal() == SIGUSR1));
  }
  CHECK_FALSE(blocked_here(SIGUSR1));
}

namespace {

sighandler_t disposition(int sig) {
  struct sigaction now {};
  sigaction(sig, nullptr, &now);
  return now.sa_handler;
}

}  // namespace

TEST_CASE("a guard gives the previous handlers back, or after a stop ignores late stop signals", "[preempt]") {
  struct sigaction before[2]{};
  sigaction(SIGUSR1, nullptr, &before[0]);
  sigaction(SIGTERM, nullptr, &before[1]);
  { PreemptGuard guard; }
  CHECK(disposition(SIGUSR1) == before[0].sa_handler);
  CHECK(disposition(SIGTERM) == before[1].sa_handler);
  {
    PreemptGuard guard;
    guard.stopped();  // the run stopped on a request
  }
  CHECK(disposition(SIGUSR1) == SIG_IGN);
  CHECK(disposition(SIGTERM) == SIG_IGN);
  CHECK(disposition(SIGINT) != SIG_IGN);
  kill(getpid(), SIGUSR1);  // a late one: ignored (the test goes on)
  kill(getpid(), SIGTERM);
  CHECK(disposition(SIGUSR1) == SIG_IGN);
  sigaction(SIGUSR1, &before[0], nullptr);  // this process's handlers back for the tests after this one
  sigaction(SIGTERM, &before[1], nullptr);
}
