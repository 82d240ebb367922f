// Synchronized batchnorm under MPI (-np 2 and -np 4): a layer with sync: true on R ranks, each holding its slice of a
// batch, matches one batchnorm over the whole batch (outputs, input gradients, running statistics; the scale and
// shift gradients summed over the ranks); every rank ends bit-identical; without sync each rank normalizes its own.
#include <yaml-cpp/yaml.h>

#include "comm/stat_exchange.h"
#include "core/config_reader.h"
#include "layers/batchnorm.h"
#include "layers/layer_def.h"
#include "tests/mpi_util.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

namespace {

LayerPtr make_bn(const std::string& yaml, int64_t channels) {
  Section s(YAML::Load(yaml), "bn", "test", YAML::Node(YAML::NodeType::Map));
  LayerSpec spec;
  spec.type = "batchnorm", spec.name = "bn";
  find_layer("batchnorm").parse(s, spec);
  s.finish();
  LayerPtr l = find_layer("batchnorm").build(spec, LayerInput{{2, channels, 3, 3}, 0, {}});
  Rng rng(1);
  l->init_params(rng);
  auto p = l->params();
  *p[0].value = random_tensor({channels}, 3);  // gamma, beta away from 1 and 0
  *p[1].value = random_tensor({channels}, 4);
  return l;
}

// Rows [r * n, (r + 1) * n) of a [R*n, ...] tensor.
Tensor slice(const Tensor& t, int r, int64_t n) {
  Shape s = t.shape();
  s[0] = n;
  Tensor out(s);
  const int64_t per = t.numel() / t.dim(0);
  std::copy_n(t.data() + r * n * per, n * per, out.data());
  return out;
}

// One training pass of bn: x -> y, dy -> dx.
void pass(Layer& bn, const Tensor& x, const Tensor& dy, Tensor& y, Tensor& dx) {
  bn.forward(x, y, StepContext{true, 1, 0});
  bn.backward(x, y, dy, &dx);
}

// This rank's rows r * n .. of the whole batch's output and input gradient are what the synchronized layer gave.
void check_rows(const Tensor& y, const Tensor& dx, const Tensor& y_all, const Tensor& dx_all, int r, int64_t n) {
  const Tensor y_want = slice(y_all, r, n), dx_want = slice(dx_all, r, n);
  for (int64_t i = 0; i < y.numel(); ++i) {
    REQUIRE(y.data()[i] == Approx(y_want.data()[i]).margin(1e-5));
    REQUIRE(dx.data()[i] == Approx(dx_want.data()[i]).margin(1e-5));
  }
}

// The synchronized layer's running statistics are the whole batch's, on every rank alike.
void check_running(Layer& mine, Layer& whole, int64_t C) {
  auto st = mine.state(), st_all = whole.state();
  for (size_t k = 0; k < st.size(); ++k)
    for (int64_t c = 0; c < C; ++c) CHECK(st[k].second->data()[c] == Approx(st_all[k].second->data()[c]).epsilon(1e-5));
  CHECK(identical_across_ranks(to_vector(*st[0].second)));
  CHECK(identical_across_ranks(to_vector(*st[1].second)));
}

}  // namespace

TEST_CASE("synchronized batchnorm on R ranks matches one batchnorm over the whole batch", "[mpi][syncbn]") {
  const int R = g_world.size, r = g_world.rank;
  const int64_t C = 5, n = 3;  // 3 samples a rank (uneven planes: 3x3)
  const Tensor x = random_tensor({R * n, C, 3, 3}, 21, 2.0f), dy = random_tensor({R * n, C, 3, 3}, 22);
  WorldStatExchange ex(g_world);
  const StepContext train{true, 1, 0};

  LayerPtr whole = make_bn("{momentum: 0.1, eps: 1e-5}", C);
  Tensor y_all(x.shape()), dx_all(x.shape());
  LayerPtr mine = make_bn("{momentum: 0.1, eps: 1e-5, sync: true}", C);
  mine->use_stat_exchange(&ex);
  const Tensor xs = slice(x, r, n), dys = slice(dy, r, n);
  Tensor y(xs.shape()), dx(xs.shape());
  for (int k = 0; k < 2; ++k) {  // twice: the running statistics move on alike
    pass(*whole, x, dy, y_all, dx_all);
    pass(*mine, xs, dys, y, dx);
  }
  check_rows(y, dx, y_all, dx_all, r, n);
  check_running(*mine, *whole, C);
  // The scale and shift gradients are this rank's (the gradient exchange sums them): their sum over the ranks is the
  // whole batch's.
  for (size_t k = 0; k < 2; ++k) {
    std::vector<float> g = to_vector(*mine->params()[k].grad), all(g.size() * R);
    std::vector<double> in(g.begin(), g.end()), out(all.size());
    ex.allgather(in.data(), out.data(), static_cast<int64_t>(in.size()));
    for (int64_t c = 0; c < C; ++c) {
      double s = 0;
      for (int q = 0; q < R; ++q) s += out[static_cast<size_t>(q * C + c)];
      CHECK(s == Approx(whole->params()[k].grad->data()[c]).margin(1e-4));
    }
  }

  // Without sync, each rank's statistics are its own: the running means differ between ranks.
  LayerPtr local = make_bn("{momentum: 0.1, eps: 1e-5}", C);
  local->use_stat_exchange(&ex);  // ignored without sync
  local->forward(xs, y, train);
  CHECK_FALSE(identical_across_ranks(to_vector(*local->state()[0].second)));
}

TEST_CASE("synchronized batchnorm: a rank with no samples (a short last batch) joins the exchange and adds nothing",
          "[mpi][syncbn]") {
  // The last rank holds none of the batch; the others 3 samples each. Every rank must take part in both exchanges
  // (else the others wait forever), the statistics are those of the samples there are, and the empty rank's scale
  // and shift gradients are 0.
  const int R = g_world.size, r = g_world.rank;
  const int64_t C = 4, n = 3;
  const Tensor x = random_tensor({(R - 1) * n, C, 3, 3}, 31, 2.0f), dy = random_tensor({(R - 1) * n, C, 3, 3}, 32);
  WorldStatExchange ex(g_world);
  LayerPtr whole = make_bn("{momentum: 0.1, eps: 1e-5}", C);
  Tensor y_all(x.shape()), dx_all(x.shape());
  pass(*whole, x, dy, y_all, dx_all);
  LayerPtr mine = make_bn("{momentum: 0.1, eps: 1e-5, sync: true}", C);
  mine->use_stat_exchange(&ex);
  const int64_t here = r == R - 1 ? 0 : n;
  const Tensor xs = here ? slice(x, r, n) : Tensor({0, C, 3, 3}), dys = here ? slice(dy, r, n) : Tensor({0, C, 3, 3});
  Tensor y(xs.shape()), dx(xs.shape());
  pass(*mine, xs, dys, y, dx);
  if (here) {
    check_rows(y, dx, y_all, dx_all, r, n);
  } else {
    for (auto& p : mine->params())
      for (float g : to_vector(*p.grad)) CHECK(g == 0.f);
  }
  check_running(*mine, *whole, C);
}
