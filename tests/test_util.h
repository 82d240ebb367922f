// Shared test helpers: tensors from lists, finite-difference gradient checks, temporary folders.
#pragma once
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "layers/layer.h"
#include "trainer/config.h"

namespace octet::test {

Tensor make_tensor(const Shape& shape, const std::vector<float>& values);
Tensor random_tensor(const Shape& shape, uint64_t seed, float scale = 1.0f);
std::vector<float> to_vector(const Tensor& t);
// |a - b| / |b| in the L2 norm (b the reference).
double rel_l2(const std::vector<float>& a, const std::vector<float>& b);

// Finite-difference check of a layer: L = sum(r * y) with fixed random r; compares backward's dx and parameter
// grads with central differences (double accumulation) on up to `samples` elements of each. `skip(i)` excludes
// input elements that sit on a kink (ReLU at 0, max-pool ties). skip_in: a layer's second input (add), bound to it and
// checked like dx. Asserts how much it compared: at least half of dx's samples (after skip), and some point at all.
void check_gradients(Layer& layer, const Tensor& x, double eps = 1e-2, double tol = 2e-2, int samples = 48,
                     const std::function<bool(int64_t)>& skip = nullptr, bool check_dx = true,
                     Tensor* skip_in = nullptr);

// A fresh empty folder under /tmp, removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);
// Every parameter value and running statistic (and, with optimizer_state, the optimizer's buffers) stored in a
// checkpoint of the config's model.
std::vector<float> checkpoint_values(const std::string& ckpt, const Config& cfg, const Shape& input,
                                     bool optimizer_state);
std::string source_dir();  // the project's top folder

}  // namespace octet::test
