// Implementation of the shared test helpers.
#include "tests/test_util.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "core/rng.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "layers/layer_def.h"
#include "optim/optimizer.h"

namespace octet::test {

Tensor make_tensor(const Shape& shape, const std::vector<float>& values) {
  Tensor t(shape);
  REQUIRE(static_cast<int64_t>(values.size()) == t.numel());
  for (size_t i = 0; i < values.size(); ++i) t.data()[i] = values[i];
  return t;
}

Tensor random_tensor(const Shape& shape, uint64_t seed, float scale) {
  Tensor t(shape);
  Rng rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = scale * rng.normal();
  return t;
}

std::vector<float> to_vector(const Tensor& t) { return std::vector<float>(t.data(), t.data() + t.numel()); }

static double loss_of(Layer& layer, const Tensor& x, const Tensor& r, const StepContext& ctx) {
  Tensor y(layer.output_shape(x.shape()));
  layer.forward(x, y, ctx);
  double s = 0;
  for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(y.data()[i]) * r.data()[i];
  return s;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 1e-30;
  for (size_t i = 0; i < b.size(); ++i) d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]), n += double(b[i]) * b[i];
  return std::sqrt(d / n);
}

static void compare(const char* what, int64_t i, double analytic, double numeric, double tol) {
  INFO(what << "[" << i << "] analytic " << analytic << " numeric " << numeric);
  CHECK(std::abs(analytic - numeric) <= tol * std::max({1.0, std::abs(analytic), std::abs(numeric)}));
}

void check_gradients(Layer& layer, const Tensor& x0, double eps, double tol, int samples,
                     const std::function<bool(int64_t)>& skip, bool check_dx, Tensor* skip_in) {
  StepContext ctx;
  ctx.train = true;
  ctx.seed = 7;
  ctx.step = 3;
  Tensor x = x0;
  Tensor y(layer.output_shape(x.shape()));
  Tensor r = random_tensor(y.shape(), 99);
  Tensor dskip(skip_in ? skip_in->shape() : Shape{0});
  if (skip_in) layer.bind_skip(skip_in, &dskip);
  layer.forward(x, y, ctx);
  Tensor dx(x.shape());
  layer.backward(x, y, r, &dx);
  std::vector<Tensor> grads;  // analytic parameter gradients (forward passes below do not touch them)
  for (auto& p : layer.params()) grads.push_back(*p.grad);

  // Central difference of the loss in element i of tensor t (restored afterwards).
  auto numeric = [&](Tensor& t, int64_t i) {
    const float keep = t.data()[i];
    t.data()[i] = keep + static_cast<float>(eps);
    const double lp = loss_of(layer, x, r, ctx);
    t.data()[i] = keep - static_cast<float>(eps);
    const double lm = loss_of(layer, x, r, ctx);
    t.data()[i] = keep;
    return (lp - lm) / (2 * eps);
  };
  Rng pick(1234);
  auto sample = [&](const Tensor& t) { return static_cast<int64_t>(pick.below(static_cast<uint64_t>(t.numel()))); };
  int compared = 0, wanted = 0;  // points compared, and the least that makes the check mean something
  if (check_dx) {
    int dx_compared = 0;
    for (int s = 0; s < samples; ++s) {
      const int64_t i = sample(x);
      if (skip && skip(i)) continue;
      compare("dx", i, dx.data()[i], numeric(x, i), tol);
      ++dx_compared;
    }
    INFO("dx: " << dx_compared << " of " << samples << " sampled points compared (the rest on a kink)");
    CHECK(dx_compared >= samples / 2);  // (a skip rule that leaves out most points checks little)
    compared += dx_compared, wanted += samples / 2;
  }
  if (skip_in)
    for (int s = 0; s < samples; ++s, ++compared, ++wanted) {
      const int64_t i = sample(*skip_in);
      compare("dskip", i, dskip.data()[i], numeric(*skip_in, i), tol);
    }
  auto params = layer.params();
  for (size_t k = 0; k < params.size(); ++k)
    for (int s = 0; s < samples; ++s, ++compared, ++wanted) {
      const int64_t i = sample(*params[k].value);
      compare(params[k].name.c_str(), i, grads[k].data()[i], numeric(*params[k].value, i), tol);
    }
  INFO("gradient points compared: " << compared);
  CHECK(compared >= std::max(wanted, 1));  // (a layer with no input gradient checked and no parameters checks nothing)
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/octet-test-XXXXXX";  // mkdtemp's template: it replaces the six X
  REQUIRE(mkdtemp(tmpl) != nullptr);
  path_ = tmpl;
}

TempDir::~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

std::string source_dir() {  // the environment's OCTET_SOURCE_DIR first: test programs run from a GPU bundle
  const char* e = std::getenv("OCTET_SOURCE_DIR");
  return e && *e ? e : OCTET_SOURCE_DIR;
}

std::vector<float> checkpoint_values(const std::string& ckpt, const Config& cfg, const Shape& input,
                                     bool optimizer_state) {
  Model m = build_model(cfg.model.layers, input);
  NamedTensors t;
  for (auto& p : m.params()) t.push_back({p.name, p.value});
  for (auto& s : m.state()) t.push_back(s);  // running statistics, as a run orders them
  const size_t model_tensors = t.size();
  Optimizer opt(cfg.optimizer, m.params());
  for (auto& s : opt.state()) t.push_back(s);
  load_checkpoint(ckpt, CheckpointState{t, {}});
  if (!optimizer_state) t.resize(model_tensors);
  std::vector<float> out;
  for (auto& [name, tensor] : t) {
    auto v = to_vector(*tensor);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace octet::test
