// MPI tests of PowerSGD's exchange under mpirun -np 2 and -np 4: the ranks' mean comes back exactly where it has rank
// <= r (and at full rank), identical bytes on every rank, the error is what was not sent and feeds the next step, Q is
// the ranks' mean and warm-starts the next step; the simulated device ends in the CPU's bytes; GradSync's plan sends
// what DDP's rule compresses as P and Q from start_step on and everything else (and everything before) as fp32; and
// compression.method auto's start-up: every rank takes rank 0's plan.
#include <algorithm>
#include <cmath>

#include "comm/auto_plan.h"
#include "comm/grad_sync.h"
#include "comm/mpi_transport.h"
#include "comm/powersgd.h"
#include "comm/staged_transport.h"
#include "core/rng.h"
#include "tests/mpi_util.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

namespace {

// rows x cols values: the sum of `terms` outer products u_t v_t^T, u_t shared by every rank, v_t this rank's own.
std::vector<float> low_rank_gradient(int64_t rows, int64_t cols, int terms, int rank) {
  std::vector<float> m(static_cast<size_t>(rows * cols), 0.f);
  for (int t = 0; t < terms; ++t) {
    Rng ru(100 + t), rv(200 + 17 * rank + t);
    std::vector<float> u(rows), v(cols);
    for (auto& x : u) x = ru.normal();
    for (auto& x : v) x = rv.normal();
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) m[i * cols + j] += u[i] * v[j];
  }
  return m;
}

// The mean over the ranks of each rank's low_rank_gradient, in double.
std::vector<double> mean_gradient(int64_t rows, int64_t cols, int terms) {
  std::vector<double> mean(static_cast<size_t>(rows * cols), 0.0);
  for (int r = 0; r < g_world.size; ++r) {
    const auto m = low_rank_gradient(rows, cols, terms, r);
    for (size_t i = 0; i < m.size(); ++i) mean[i] += m[i] / g_world.size;
  }
  return mean;
}

double worst_error(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return worst / scale;
}

}  // namespace

TEST_CASE("powersgd: the exact mean where it has rank <= r, the same bytes everywhere, error = what was not sent",
          "[mpi][powersgd]") {
  MpiTransport t(g_world);
  struct Shape {
    int64_t rows, cols;
    int terms, r;
  };
  // A mean of rank r at r = 1, 2, 3, and a full-rank mean at full rank (r = rows). (At r above the mean's rank, P's
  // extra columns are orthonormalized rounding noise, as in DDP: not exact.)
  for (const Shape sh : {Shape{12, 40, 1, 1}, Shape{30, 17, 2, 2}, Shape{40, 12, 3, 3}, Shape{6, 50, 6, 6}}) {
    INFO(sh.rows << " x " << sh.cols << ", mean of rank " << sh.terms << ", r " << sh.r);
    PowerSgdState st = make_powersgd_state({sh.rows, sh.cols, sh.r}, 77, Exec::host());
    const std::vector<float> q0 = to_vector(st.q);
    CHECK(identical_across_ranks(q0));  // seeded alike
    std::vector<float> g = low_rank_gradient(sh.rows, sh.cols, sh.terms, g_world.rank);
    const std::vector<float> mine = g;
    CommStats s;
    ReduceOptions o;
    o.what = "w";
    powersgd_reduce(t, {g.data(), g.size(), Device::CPU}, PowerSgdParams{.rank = sh.r}, st, o, s);
    CHECK(identical_across_ranks(g));
    CHECK(identical_across_ranks(to_vector(st.q)));
    CHECK(worst_error(g, mean_gradient(sh.rows, sh.cols, sh.terms)) < 2e-5);
    const std::vector<float> err = to_vector(st.error);
    for (size_t i = 0; i < g.size(); ++i) REQUIRE(err[i] == mine[i] - g[i]);  // M - P Q^T, rounded once
    if (g_world.size > 1 && (sh.rows + sh.cols) * sh.r < sh.rows * sh.cols) CHECK(s.bytes_sent < s.fp32_bytes);
    CHECK(s.fp32_bytes == static_cast<uint64_t>(2.0 * (g_world.size - 1) / g_world.size * 4.0 * g.size()));
  }
}

TEST_CASE("powersgd: the error feeds the next step, Q warm-starts it, a rank-1 view of a full-rank mean converges",
          "[mpi][powersgd]") {
  // A mean of rank 3 sent at rank 1 step after step with error feedback: what arrives over k steps sums to k times
  // the mean minus the mean error, so the running average approaches the mean (the point of error feedback).
  MpiTransport t(g_world);
  const int64_t rows = 10, cols = 24;
  PowerSgdState st = make_powersgd_state({rows, cols, 1}, 5, Exec::host());
  const auto mean = mean_gradient(rows, cols, 3);
  std::vector<double> sent(static_cast<size_t>(rows * cols), 0.0);
  double first = 0, last = 0;
  const int steps = 60;
  for (int k = 1; k <= steps; ++k) {
    std::vector<float> g = low_rank_gradient(rows, cols, 3, g_world.rank);
    CommStats s;
    powersgd_reduce(t, {g.data(), g.size(), Device::CPU}, PowerSgdParams{}, st, ReduceOptions{}, s);
    REQUIRE(identical_across_ranks(g));
    std::vector<float> avg(g.size());
    for (size_t i = 0; i < g.size(); ++i) avg[i] = static_cast<float>((sent[i] += g[i]) / k);
    (k == 1 ? first : last) = worst_error(avg, mean);
  }
  INFO("one step " << first << ", average of " << steps << " steps " << last);
  CHECK(first > 0.05);  // rank 1 misses most of a rank-3 mean
  CHECK(last < first / 8);
}

TEST_CASE("powersgd on the simulated device ends in the CPU's bytes, step after step", "[mpi][powersgd][sim]") {
  Exec& sim = Exec::sim();
  MpiTransport t(g_world);
  StagedTransport staged(t, sim);
  const int64_t rows = 20, cols = 75;
  PowerSgdState cpu = make_powersgd_state({rows, cols, 2}, 9, Exec::host());
  PowerSgdState dev = make_powersgd_state({rows, cols, 2}, 9, sim);
  for (int k = 0; k < 3; ++k) {
    std::vector<float> g = low_rank_gradient(rows, cols, 3, g_world.rank + k);
    Tensor d = Tensor({rows * cols}, Device::CPU);
    std::copy(g.begin(), g.end(), d.data());
    Tensor dg = d.to(Device::Sim);
    CommStats s1, s2;
    powersgd_reduce(t, {g.data(), g.size(), Device::CPU}, PowerSgdParams{.rank = 2}, cpu, ReduceOptions{}, s1);
    ReduceOptions o;
    o.exec = &sim;
    powersgd_reduce(staged, span_of(dg), PowerSgdParams{.rank = 2}, dev, o, s2);
    sim.sync(sim.comm());
    CHECK(to_vector(dg.to(Device::CPU)) == g);
    CHECK(to_vector(dev.error.to(Device::CPU)) == to_vector(cpu.error));
    CHECK(to_vector(dev.q.to(Device::CPU)) == to_vector(cpu.q));
  }
}

TEST_CASE("GradSync with powersgd: DDP's rule picks the tensors, fp32 before start_step, P and Q after, state named",
          "[mpi][powersgd][sync]") {
  // conv 20 x 1 x 5 x 5 at rank 2: (20 + 25) * 2 * 2 < 500, compressed; a 10 x 10 matrix at rank 2 would shrink 2.5x:
  // compressed; at rank 4 only 1.25x: fp32 (min_compression_rate 2); a bias: fp32.
  Tensor w = random_tensor({20, 1, 5, 5}, 5), b = random_tensor({20}, 6), sq = random_tensor({10, 10}, 7);
  CompressionConfig cfg;
  cfg.base.codec.method = "powersgd";
  cfg.base.codec.rank = 4;
  cfg.base.codec.start_step = 2;
  MpiTransport t(g_world);
  Tensor gw({20, 1, 5, 5}), gb({20}), gsq({10, 10});
  GradSync sync(t, cfg,
                {{{"conv.weight", &w, &gw}, "conv", "conv", WeightKind::Conv},
                 {{"conv.bias", &b, &gb}, "conv", "conv", WeightKind::Conv},
                 {{"sq.weight", &sq, &gsq}, "sq", "fc", WeightKind::Fc}});
  const std::string plan = sync.plan();
  INFO(plan);
  CHECK_THAT(plan, Catch::Contains("conv.weight") && Catch::Contains("powersgd rank 4 (20 x 25: P and Q 180 values)") &&
                       Catch::Contains("from step 2"));
  CHECK_THAT(plan, Catch::Contains("sq.weight            100 values  none"));
  const auto state = sync.feedback_state();
  REQUIRE(state.size() == 2);
  CHECK(state[0].first == "conv.weight.powersgd_error");
  CHECK(state[1].first == "conv.weight.powersgd_q");
  for (uint64_t step = 0; step < 4; ++step) {
    Tensor fresh = random_tensor({20, 1, 5, 5}, 40 + g_world.rank + 10 * static_cast<int>(step));
    gw.copy_from(fresh);
    gb.copy_from(random_tensor({20}, 3));
    gsq.copy_from(random_tensor({10, 10}, 4));
    // The fp32 mean of the conv weight's gradients, to compare.
    std::vector<double> mean(500, 0.0);
    for (int r = 0; r < g_world.size; ++r) {
      const Tensor x = random_tensor({20, 1, 5, 5}, 40 + r + 10 * static_cast<int>(step));
      for (int64_t i = 0; i < 500; ++i) mean[i] += x.data()[i] / g_world.size;
    }
    CommStats s;
    sync.sync(step, s);
    CHECK(identical_across_ranks(to_vector(gw)));
    const double err = worst_error(to_vector(gw), mean);
    INFO("step " << step << ": worst relative difference from the fp32 mean " << err);
    if (step < 2)
      CHECK(err < 1e-5);  // fp32 (summed in another order)
    else if (g_world.size > 1)
      CHECK(err > 1e-3);  // rank 4 of a random 20 x 25 mean: an approximation
  }
  sync.verify_identical(4);
}

TEST_CASE("auto: every rank takes rank 0's plan, measured over the real transport", "[mpi][auto]") {
  Tensor w1 = random_tensor({50, 20, 5, 5}, 1), w2 = random_tensor({500, 800}, 2), b2 = random_tensor({500}, 3);
  Tensor g1({50, 20, 5, 5}), g2({500, 800}), gb2({500});
  const std::vector<SyncTensor> tensors = {{{"conv.weight", &w1, &g1}, "conv", "conv", WeightKind::Conv},
                                           {{"fc.weight", &w2, &g2}, "fc", "fc", WeightKind::Fc},
                                           {{"fc.bias", &b2, &gb2}, "fc", "fc", WeightKind::Fc}};
  for (const char* policy : {"lossless", "aggressive"}) {
    CompressionConfig cfg;
    cfg.base.codec.method = "auto";
    cfg.policy = policy;
    const AutoPlan plan = make_auto_plan(g_world, tensors, cfg, Exec::host());
    INFO(plan.text());
    REQUIRE(plan.layers.size() == 2);
    std::vector<float> picks;
    for (const LayerChoice& c : plan.layers) {
      const auto& cands = policy_candidates(policy);
      const auto at = std::find(cands.begin(), cands.end(), c.candidate);
      REQUIRE(at != cands.end());
      picks.push_back(static_cast<float>(at - cands.begin()));
    }
    CHECK(identical_across_ranks(picks));
    if (g_world.rank == 0) {
      CHECK(plan.link.bandwidth_gbs > 0);
      CHECK(plan.layers[1].fp32_ms > 0);
      CHECK(plan.layers[1].ms <= plan.layers[1].fp32_ms);  // fp32 is a candidate: the choice is never slower
    }
  }
}
