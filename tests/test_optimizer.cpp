// Optimizer steps against hand-computed values, and learning-rate schedules at known points.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "optim/optimizer.h"
#include "optim/optimizer_kernels.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

namespace {
struct OneParam {
  Tensor w = make_tensor({1}, {1.0f});
  Tensor g = make_tensor({1}, {0.2f});
  std::vector<Param> params() { return {{"p.weight", &w, &g}}; }
};
}  // namespace

TEST_CASE("SGD with momentum and weight decay", "[optim]") {
  OneParam p;
  OptimizerConfig c;
  c.lr = 0.5f;
  c.momentum = 0.9f;
  c.weight_decay = 0.1f;
  Optimizer opt(c, p.params());
  opt.step(c.lr);  // d = 0.2 + 0.1*1 = 0.3; v = 0.3; w = 1 - 0.15
  CHECK(p.w.data()[0] == Approx(0.85f));
  opt.step(c.lr);  // d = 0.2 + 0.085 = 0.285; v = 0.27 + 0.285 = 0.555; w = 0.85 - 0.2775
  CHECK(p.w.data()[0] == Approx(0.5725f));
  REQUIRE(opt.state().size() == 1);
  CHECK(opt.state()[0].first == "p.weight.momentum");
  CHECK(opt.state()[0].second->data()[0] == Approx(0.555f));
}

TEST_CASE("SGD Nesterov and plain", "[optim]") {
  OneParam p;
  OptimizerConfig c;
  c.lr = 0.5f;
  c.momentum = 0.9f;
  c.weight_decay = 0.1f;
  c.nesterov = true;
  Optimizer opt(c, p.params());
  opt.step(c.lr);  // d = 0.3; v = 0.3; w -= 0.5 * (0.3 + 0.27)
  CHECK(p.w.data()[0] == Approx(0.715f));
  OneParam q;
  OptimizerConfig plain;
  plain.lr = 0.1f;
  Optimizer sgd(plain, q.params());
  CHECK(sgd.state().empty());
  sgd.step(0.1f);
  CHECK(q.w.data()[0] == Approx(0.98f));
}

TEST_CASE("RMSProp", "[optim]") {
  OneParam p;
  p.g.data()[0] = 0.5f;
  OptimizerConfig c;
  c.type = OptimizerType::Rmsprop;
  c.lr = 0.01f;
  c.alpha = 0.9f;
  Optimizer opt(c, p.params());
  opt.step(c.lr);  // s = 0.1 * 0.25 = 0.025; w = 1 - 0.01 * 0.5 / sqrt(0.025)
  CHECK(p.w.data()[0] == Approx(1.0 - 0.005 / std::sqrt(0.025)));
  CHECK(opt.state()[0].first == "p.weight.square_avg");
  CHECK(opt.state()[0].second->data()[0] == Approx(0.025f));
}

TEST_CASE("learning-rate schedules", "[optim][schedule]") {
  OptimizerConfig o;
  o.lr = 1.0f;
  ScheduleConfig s;
  const int64_t spe = 100;  // steps per epoch
  SECTION("constant") { CHECK(lr_at(o, s, 12345, spe, 5) == 1.0); }
  SECTION("step") {
    s.type = ScheduleType::Step;
    s.step_epochs = 2;
    s.gamma = 0.1;
    CHECK(lr_at(o, s, 0, spe, 10) == Approx(1.0));
    CHECK(lr_at(o, s, 199, spe, 10) == Approx(1.0));
    CHECK(lr_at(o, s, 200, spe, 10) == Approx(0.1));
    CHECK(lr_at(o, s, 450, spe, 10) == Approx(0.01));
  }
  SECTION("multistep") {
    s.type = ScheduleType::Multistep;
    s.milestones = {1, 3};
    s.gamma = 0.5;
    CHECK(lr_at(o, s, 99, spe, 5) == Approx(1.0));
    CHECK(lr_at(o, s, 100, spe, 5) == Approx(0.5));
    CHECK(lr_at(o, s, 300, spe, 5) == Approx(0.25));
  }
  SECTION("cosine with floor") {
    s.type = ScheduleType::Cosine;
    s.min_lr = 0.1;
    CHECK(lr_at(o, s, 0, spe, 4) == Approx(1.0));
    CHECK(lr_at(o, s, 200, spe, 4) == Approx(0.55));
    CHECK(lr_at(o, s, 400, spe, 4) == Approx(0.1));
  }
  SECTION("linear warm-up") {
    s.warmup_epochs = 1;
    s.warmup_start = 0.2;
    CHECK(lr_at(o, s, 0, spe, 5) == Approx(0.2));
    CHECK(lr_at(o, s, 50, spe, 5) == Approx(0.6));
    CHECK(lr_at(o, s, 100, spe, 5) == Approx(1.0));
  }
}

TEST_CASE("an optimizer restricted to a range updates only those values and their state", "[optim]") {
  Tensor w = make_tensor({2, 3}, {1, 1, 1, 1, 1, 1}), g = make_tensor({2, 3}, {0.2f, 0.2f, 0.2f, 0.2f, 0.2f, 0.2f});
  OptimizerConfig c;
  c.lr = 0.5f;
  c.momentum = 0.9f;
  c.weight_decay = 0.1f;
  Optimizer opt(c, {{"fc.weight", &w, &g}});
  opt.restrict("fc.weight", 2, 3);  // a rank that owns values 2..4
  opt.step(c.lr);
  const std::vector<float> want = {1, 1, 0.85f, 0.85f, 0.85f, 1};
  for (int i = 0; i < 6; ++i) CHECK(w.data()[i] == Approx(want[i]));
  const float* m = opt.state()[0].second->data();
  CHECK(m[0] == 0.f);
  CHECK(m[2] == Approx(0.3f));
  CHECK(m[5] == 0.f);
  CHECK_THROWS_WITH(opt.restrict("fc.weight", 4, 3), Catch::Contains("range [4, 7) outside fc.weight of 6"));
  CHECK_THROWS_WITH(opt.restrict("fc.bias", 0, 1), Catch::Contains("no parameter named fc.bias"));
}

TEST_CASE("the fused update runs its chunks on the CPU's threads: the same bits on one thread or two", "[optim]") {
  const std::vector<int64_t> sizes = {3 * kUpdateChunk + 5, 9, kUpdateChunk};
  for (int variant = 0; variant < 2; ++variant) {
    std::vector<std::vector<float>> w[2], g, s[2];
    for (size_t i = 0; i < sizes.size(); ++i) {
      const Tensor wi = random_tensor({sizes[i]}, 1 + i), gi = random_tensor({sizes[i]}, 10 + i),
                   si = random_tensor({sizes[i]}, 20 + i, 0.1f);
      g.push_back(to_vector(gi));
      for (int t = 0; t < 2; ++t) {
        w[t].push_back(to_vector(wi));
        std::vector<float> st = to_vector(si);
        for (float& v : st) v = std::abs(v);
        s[t].push_back(st);
      }
    }
    g[1][4] = std::numeric_limits<float>::infinity();  // the second tensor's flag alone
    std::vector<uint32_t> flags[2];
    for (int t = 0; t < 2; ++t) {
      std::vector<UpdateSlice> table;
      for (size_t i = 0; i < sizes.size(); ++i)
        table.push_back({w[t][i].data(), g[i].data(), s[t][i].data(), sizes[i], 1.f, i == 2 ? 0.f : 1.f});
      const std::vector<UpdateChunk> chunks = update_chunks(table);
      flags[t].assign(sizes.size(), 0);
      omp_set_num_threads(t + 1);
      if (variant == 0)
        sgd_multi_cpu(table.data(), chunks.data(), static_cast<int64_t>(chunks.size()), {0.1f, 0.9f, 1e-4f, true},
                      flags[t].data(), Stream{});
      else
        rmsprop_multi_cpu(table.data(), chunks.data(), static_cast<int64_t>(chunks.size()), {0.01f, 0.9f, 1e-8f, 1e-4f},
                          flags[t].data(), Stream{});
    }
    omp_set_num_threads(1);
    INFO("variant " << variant);
    auto same_bits = [](const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
      for (size_t i = 0; i < a.size(); ++i)  // (bytes: the flagged tensor holds a NaN, which no == matches)
        if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), 4 * a[i].size()) != 0) return false;
      return true;
    };
    CHECK(same_bits(w[0], w[1]));
    CHECK(same_bits(s[0], s[1]));
    CHECK(flags[0] == std::vector<uint32_t>{0, 1, 0});
    CHECK(flags[1] == flags[0]);
  }
}
