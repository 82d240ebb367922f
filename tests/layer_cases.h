// The one table of layer cases (a layer with its parameters, an input, the tolerances of its checks) that drives the
// finite-difference gradient tests on the CPU and the CPU-vs-CUDA parity tests on a GPU.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "layers/layer.h"

namespace octet::test {

struct LayerCase {
  LayerCase(std::string n, std::function<LayerPtr()> m, std::function<Tensor()> in)
      : name(std::move(n)), make(std::move(m)), input(std::move(in)) {}
  std::string name;
  std::function<LayerPtr()> make;  // the layer, parameters initialized (seeded), on the host
  std::function<Tensor()> input;   // its input [N, ...], on the host
  double eps = 1e-2, tol = 2e-2;   // finite differences: step and relative tolerance
  // CPU vs CUDA: |cuda - cpu| <= parity * max(1, max |cpu|) per tensor; 0: equal values (the same arithmetic in the
  // same order), more where a library sums in another order than oneDNN (cuDNN, cuBLAS) or the formula is computed
  // another way (LRN's power).
  double parity = 0;
  // Input elements on a kink, left out of the dx check (ReLU at 0; max-pool ties are avoided by the input itself).
  std::function<bool(const Tensor& x, int64_t i)> skip;
  // A second input (add: the earlier layer's output), bound with Layer::bind_skip; its gradient is checked as dx is.
  std::function<Tensor()> skip_input;
};

const std::vector<LayerCase>& layer_cases();

}  // namespace octet::test
