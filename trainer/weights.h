// Weights in and out of a model by name: its tensors (parameters and batchnorm running statistics), their names in
// octet's own naming or a reference's (model.naming: torchvision_resnet follows torchvision's ResNet state_dict keys),
// loading them from a safetensors file, an octet checkpoint or a run directory (model.init_from, octet eval), and
// writing them as safetensors (octet export).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "layers/model.h"

namespace octet {

// How a config's layer names map to a reference's tensor names (model.naming).
enum class Naming { Octet, TorchvisionResnet };
Naming naming_named(const std::string& name);  // an unknown name throws listing the known ones
const char* naming_name(Naming n);
std::vector<std::string> naming_names();
// octet's "s2b1_add.proj_bn.running_mean" as torchvision's "layer2.0.downsample.1.running_mean" and back ("" where the
// name has no counterpart, or maps to itself under Naming::Octet).
std::string to_reference_name(Naming n, const std::string& octet_name);
std::string from_reference_name(Naming n, const std::string& reference_name);

// The tensors a model's weights are: each layer's parameters then its state (running statistics), in model order.
std::vector<std::pair<std::string, Tensor*>> weight_tensors(Model& model);

// Where weights come from: a safetensors file, an octet checkpoint, or a run directory (its checkpoint.bin).
struct WeightsLoad {
  std::string file;                             // the file read
  std::vector<std::string> loaded;              // the model's names filled from it
  std::vector<std::string> skipped;             // the model's names left as initialized (skip patterns)
  std::vector<std::string> unused;              // the file's names the model has no tensor for (or skipped layers')
  int64_t step = -1;                            // the checkpoint's step, or the file's metadata "step" (-1: unknown)
  std::map<std::string, std::string> metadata;  // a safetensors file's
};

// Loads every tensor of the model from path by name (octet names, or under `naming` the reference's too). Layers whose
// name matches a skip pattern (a layer name, or a glob such as "fc*" or "s4b*") keep their values. A model tensor
// neither in the file nor skipped, a shape that differs, a non-finite value or a name that two file tensors map to
// fails naming the file and the tensor; nothing is changed then. what: the key or flag named in errors.
WeightsLoad load_weights(Model& model, const std::string& path, Naming naming, const std::vector<std::string>& skip,
                         const std::string& what);
// One line for the log: "loaded 62 tensors from F (2 skipped: fc.weight, fc.bias; 1 unused: ...)".
std::string describe_load(const WeightsLoad& w);

// Writes the model's weights as safetensors at path (atomically), under octet's names or the reference's; the
// reference's batchnorms get torch's num_batches_tracked counter (I64, the step) so load_state_dict(strict=True) takes
// the file.
void export_weights(Model& model, const std::string& path, Naming names, int64_t step,
                    const std::map<std::string, std::string>& metadata);

}  // namespace octet
