// The layer contract: forward/backward on NCHW tensors (non-virtual, dispatching to the device's implementation, as
// Caffe does), params() as {name, value, grad} (all comm/ and compress/ ever see), and the context a layer runs in.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/exec.h"
#include "core/precision.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace octet {

struct Param {
  std::string name;  // "<layer>.weight", "<layer>.bias"
  Tensor* value;
  Tensor* grad;       // same shape as value; written (not accumulated) by backward
  bool norm = false;  // a normalization layer's scale or shift (optimizer.no_decay: [batchnorm])
};

// What a forward pass needs to know beyond its input: mode and the counters that key stochastic layers.
struct StepContext {
  bool train = true;
  uint64_t seed = 0;  // run seed
  uint64_t step = 0;  // global training step (keys dropout masks, so a resumed run draws the same ones)
  int64_t sample_offset =
      0;  // index of this rank's first sample in the global batch (masks follow the sample, not the rank)
};

// What the rest of the house may know of a layer type beyond its kind's name; each layer class declares its own
// (traits() below, and its registry row, layers/layer_def.h). Nothing outside layers/ tests a kind's name.
struct LayerTraits {
  bool split_outputs = false;     // FC model parallelism splits it by output neurons over the ranks (fc)
  bool column_wise = false;       // acts on each feature alone: runs on a slice of columns between split layers
  bool batch_statistics = false;  // normalizes over the training batch: needs 2+ values a channel; not in a split part
  bool reads_other = false;       // reads an earlier layer's output (skip_from()); not in a split part
  bool convolutional = false;     // weights shared over positions (AdaComp's smaller selection bin)
  bool operator==(const LayerTraits& o) const {  // (CUDA files are C++17: no defaulted comparison)
    return split_outputs == o.split_outputs && column_wise == o.column_wise && batch_statistics == o.batch_statistics &&
           reads_other == o.reads_other && convolutional == o.convolutional;
  }
};

// A layer's weights as the exchange's cost model and codec defaults class them, by its traits: convolutional
// (shared over positions: sparse codecs select in smaller bins), fully connected (split by output neurons in FC model
// parallelism), or any other layer's. Codecs' payload ratios are measured per kind (comm/cost_model.h).
enum class WeightKind { Conv, Fc, Other };
inline WeightKind weight_kind(const LayerTraits& t) {
  return t.convolutional ? WeightKind::Conv : t.split_outputs ? WeightKind::Fc : WeightKind::Other;
}

// Which activation layouts (core/layout.h) a layer takes and produces (a trait, though it may depend on the layer's
// configuration and device: blocked on the CPU and the simulated device, channels-last for a 16-bit model on a GPU and
// the simulated device): Plain only; Same: any, as long as its input, output (and skip
// input) share it (elementwise and per-channel passes); SameSkipFree: its input and output share one, its skip input
// may have another (an add whose projection convolution reads the skip input); Free: either layout on either side,
// each chosen alone (a blocked convolution, pooling).
enum class LayoutRule { Plain, Same, SameSkipFree, Free };
// The layouts a layer runs with (Model::set_layout): block sizes, 0 for plain NCHW, else nChw{B}c.
struct IoLayout {
  int in = 0, out = 0, skip = 0;
};

// How layers with weights run their convolutions and matrix products: model.precision (16-bit or tf32 with fp32
// accumulation on fp32 master weights; the other layers keep fp32: normalization, the loss) and
// parallel.deterministic (GPU: cuDNN's deterministic algorithms, so a run repeats bit for bit; false: the fastest
// algorithm cudnnFind measures).
struct LayerMath {
  Precision precision = Precision::Fp32;
  bool deterministic = true;
};

enum class Init { He, Xavier, Gaussian };
const char* init_name(Init i);
// He: N(0, 2/fan_in). Xavier (Glorot uniform): U(±sqrt(6/(fan_in+fan_out))). Gaussian (Caffe's filler): N(0, std^2).
// w on the host.
void init_weights(Tensor& w, Init kind, int64_t fan_in, int64_t fan_out, Rng& rng, float std = 0.f);

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  virtual const char* kind() const = 0;
  virtual LayerTraits traits() const { return {}; }
  // Full shapes including the batch dimension N.
  virtual Shape output_shape(const Shape& in) const = 0;
  // x: input, y: output already sized to output_shape(x.shape()), both on the layer's device (checked: an operand
  // elsewhere is an error naming the layer and the tensor); queued on its compute stream (on the CPU: done when it
  // returns).
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx);
  // dy: gradient of the loss w.r.t. y; writes parameter grads, and dx when dx != nullptr.
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx);
  virtual std::vector<Param> params() { return {}; }
  // Non-trainable state a checkpoint keeps beside the parameters (batchnorm's running statistics): never exchanged as
  // gradients; in data parallelism rank 0's copy is the one evaluated and saved (Run::share_model_state).
  virtual std::vector<std::pair<std::string, Tensor*>> state() { return {}; }
  // A layer with a second input (add: an earlier layer's output) names that layer; the model binds the tensor and
  // where its gradient goes before each pass. skip_dx is written (not accumulated) by backward.
  virtual const std::string& skip_from() const;
  void bind_skip(const Tensor* skip_x, Tensor* skip_dx) { skip_x_ = skip_x, skip_dx_ = skip_dx; }
  // The gradient routed to the skip input is the input gradient itself, value for value (an identity add): the model
  // then binds no skip_dx and reads the input gradient where it would have read the copy.
  virtual bool skip_grad_is_input_grad() const { return false; }
  // Whether backward can add its input gradient into *dx (accumulate_input_grad) instead of writing it, so that a
  // skip gradient already held there needs no summing pass of its own (Model's backward): a device convolution whose
  // data gradient cuDNN writes as it is (beta = 1; the CPU twin on the simulated device sums after it).
  virtual bool accumulates_input_grad() const { return false; }
  void accumulate_input_grad(bool on) { accumulate_dx_ = on; }
  virtual void init_params(Rng&) {}  // parameters on the host (Model::init_params moves them where the layer runs)
  // The cross-rank exchange for layers configured to normalize over every rank's batch (batchnorm's sync); others
  // ignore it. nullptr: one process.
  virtual void use_stat_exchange(class StatExchange*) {}
  // How the layer's convolutions and matrix products run (a layer that owns sub-layers hands it on).
  virtual void set_math(const LayerMath& m) { math_ = m; }
  const LayerMath& math() const { return math_; }
  Precision precision() const { return math_.precision; }
  // Fusion (Model::set_fusion): a layer that can apply the ReLU after it to its own output says so; once fused it
  // writes y = max(f(x), 0) and its backward first masks dy where y is not positive (in the same pass), and the model
  // skips the ReLU layer. Set before the layer runs, not between passes (a queued kernel reads it when it runs).
  virtual bool can_fuse_relu() const { return false; }
  void fuse_relu(bool on);
  bool fused_relu() const { return relu_; }
  // The sum of an identity add after it taken in too (Model::set_fusion): a layer that can add its skip input to its
  // own output as it writes it says so (batchnorm); once it has, its forward writes y = f(x) + skip (with relu, the
  // add's fused ReLU applied to that), reading the skip input bound to it (bind_skip) where the add would have, each
  // value rounded as the two layers' stored outputs were; the model skips the add's forward (its backward runs as it
  // is). Set before the layer runs.
  virtual bool can_take_add() const { return false; }
  void take_add(bool on, bool relu);
  bool took_add() const { return add_; }
  // Layouts (Model::set_layout): what the layer can take, and what it is given to run with (its output gradient in the
  // output's layout, its input gradient in the input's). Set before the layer runs; plain until then.
  virtual LayoutRule layout_rule() const { return LayoutRule::Plain; }
  virtual void set_layout(const IoLayout& l) { io_ = l; }  // (a layer that owns sub-layers hands theirs on)
  const IoLayout& io_layout() const { return io_; }
  // Whether its pass on device d takes channels-last (kNhwc) 16-bit operands as they are. Where it does not, forward
  // and backward run its plain pass on fp32 NCHW copies of them (layers/relayout.h) and convert the results back: the
  // same values, a pass slower (every layer's CPU twin on the simulated device; on a GPU a layer without NHWC kernels).
  virtual bool takes_nhwc(Device) const { return false; }
  // The layouts its passes run with: io_layout(), or plain inside such a plain pass (on the thread running it).
  IoLayout layout() const;
  // Whether this build has the layer's CUDA kernels.
  virtual bool has_cuda() const { return false; }
  // Runs on exec's device from now on, its parameters moved there; a CUDA context for a layer without CUDA kernels is
  // refused: "<kind> has no CUDA kernel".
  void bind(Exec& exec);
  Exec& exec() const { return *exec_; }
  Device device() const { return exec_->device(); }

 protected:
  virtual void forward_cpu(const Tensor& x, Tensor& y, const StepContext& ctx) = 0;
  virtual void backward_cpu(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) = 0;
  virtual void forward_cuda(const Tensor& x, Tensor& y, const StepContext& ctx);
  virtual void backward_cuda(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx);
  // The simulated device (core/sim.h): by default the CPU twin as one queued kernel of the compute stream; a layer
  // whose device path is plain stream work (flatten's copy) runs that instead. The default binds no skip tensor in the
  // kernel (a member written from the device thread while the host queues the next pass): a layer whose CPU twin reads
  // its skip input runs its own simulated pass (add orchestrates on the host; a batchnorm that took an add in hands
  // its kernel the view it captured).
  virtual void forward_sim(const Tensor& x, Tensor& y, const StepContext& ctx);
  // What a queued kernel of the simulated device holds of a tensor: its storage and shape as they are at launch (a
  // view is made of them when it runs; a Tensor itself would be copied deeply).
  struct KernelRef {
    void* p = nullptr;
    Shape shape;
    Device d = Device::CPU;
    DType t = DType::F32;
    bool set = false;
    KernelRef() = default;
    explicit KernelRef(const Tensor* x) : p(x ? const_cast<void*>(x->raw()) : nullptr), set(x != nullptr) {
      if (x) shape = x->shape(), d = x->device(), t = x->dtype();
    }
    Tensor view() const { return set ? Tensor::wrap(p, shape, d, t) : Tensor(); }
  };
  virtual void backward_sim(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx);
  std::string op(const char* pass) const;  // "layer conv1 (conv) forward": what errors and the sim's fault line name
  // Called at the end of bind (a layer that owns sub-layers binds them here).
  virtual void bound(Exec&) {}
  const Tensor* skip_x_ = nullptr;
  Tensor* skip_dx_ = nullptr;
  bool relu_ = false;      // the following ReLU is fused in (fuse_relu)
  bool add_ = false;       // the following identity add's sum is taken in (take_add) ...
  bool add_relu_ = false;  // ... and the ReLU fused into that add
  // backward adds its input gradient into *dx (accumulate_input_grad; atomic: a simulated-device kernel sets it as it
  // was at launch, on the device thread)
  std::atomic<bool> accumulate_dx_{false};
  IoLayout io_;  // the layouts of its input, output and skip input (set_layout)

 private:
  [[noreturn]] void no_cuda() const;
  void run_forward(const Tensor& x, Tensor& y, const StepContext& ctx);
  void run_backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx);
  // The relayout path (takes_nhwc): plain fp32 copies in the layer's scratch on its device, the plain pass, the results
  // converted back.
  void forward_relayout(const Tensor& x, Tensor& y, const StepContext& ctx);
  void backward_relayout(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx);
  template <class F>
  void plain_pass(F fn);
  struct Relay {
    Tensor x, y, dy, dx, s, ds;
  };
  std::unique_ptr<Relay> relay_;
  void check_operand(const Tensor& t, const char* what, const char* pass) const;
  std::string name_;
  Exec* exec_ = &Exec::host();
  LayerMath math_;
};

// A layer's CUDA twin declared in its class (its x_cuda.cu defines it): has_cuda, forward_cuda and backward_cuda; the
// access after it is protected. Nothing in a build without the CUDA backend.
#ifdef OCTET_WITH_CUDA
#define OCTET_LAYER_CUDA_TWIN                                                     \
 public:                                                                          \
  bool has_cuda() const override;                                                 \
                                                                                  \
 protected:                                                                       \
  void forward_cuda(const Tensor& x, Tensor& y, const StepContext& ctx) override; \
  void backward_cuda(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
#else
#define OCTET_LAYER_CUDA_TWIN
#endif

using LayerPtr = std::unique_ptr<Layer>;

}  // namespace octet
