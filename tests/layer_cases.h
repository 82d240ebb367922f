// The one table of layer cases (a layer as a config would write it, an input, the tolerances of its checks) that drives
// the finite-difference gradient tests on the CPU and the CPU-vs-device parity tests (a GPU, the simulated device).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "layers/layer.h"

namespace octet::test {

struct LayerCase {
  // yaml: the layer's entry as in model.layers (built through its registry row); seed: its parameters' init.
  LayerCase(std::string name, std::string yaml, std::function<Tensor()> input, uint64_t seed = 1,
            std::function<bool(const Tensor& x, int64_t i)> skip = nullptr);
  std::string name;
  std::string yaml;
  std::function<Tensor()> input;  // its input [N, ...], on the host
  uint64_t seed;
  double eps = 1e-2, tol = 2e-2;  // finite differences: step and relative tolerance
  // CPU vs CUDA: |cuda - cpu| <= parity * max(1, max |cpu|) per tensor; 0: equal values (the same arithmetic in the
  // same order), more where a library sums in another order than oneDNN (cuDNN, cuBLAS) or the formula is computed
  // another way (LRN's power).
  double parity = 0;
  // Input elements on a kink, left out of the dx check (ReLU at 0; max-pool ties are avoided by the input itself).
  std::function<bool(const Tensor& x, int64_t i)> skip;
  // A second input (add: the earlier layer's output, `from: src`), bound with Layer::bind_skip; its gradient is
  // checked as dx is.
  std::function<Tensor()> skip_input;
  // Run on the built layer before its checks (parameters away from their initial values).
  std::function<void(Layer&)> prepare;
  // The layer, built from yaml for input()'s shape through the registry, parameters initialized (seeded), on the host.
  LayerPtr make() const;
};

const std::vector<LayerCase>& layer_cases();

}  // namespace octet::test
