// A model: a sequence of layers (an add layer also reading an earlier layer's output) on one device with their
// activation and gradient buffers, and a per-layer gradient-ready hook that hands over an event (the gradients are
// final once it is reached; no host wait).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "layers/layer.h"

namespace octet {

class Model {
 public:
  // input: per-sample shape [C,H,W] (or [F]); layers in order, bound to exec (a layer without kernels for its device
  // fails here: "<kind> has no CUDA kernel").
  Model(Shape input, std::vector<LayerPtr> layers, Exec& exec = Exec::host());
  Exec& exec() const { return *exec_; }

  const Shape& input_shape() const { return input_; }
  int64_t outputs() const { return outputs_; }  // the last layer's values a sample (the classes)
  size_t size() const { return layers_.size(); }
  Layer& layer(size_t i) { return *layers_.at(i); }
  // Hands every layer the cross-rank exchange (synchronized batchnorm); ex outlives the model's passes.
  void use_stat_exchange(class StatExchange* ex) {
    for (auto& l : layers_) l->use_stat_exchange(ex);
  }
  // model.precision and parallel.deterministic, handed to every layer (Layer::set_math).
  void set_math(const LayerMath& m) {
    for (auto& l : layers_) l->set_math(m);
    plan_grad_buffers();  // (whether a convolution can add into a skip gradient depends on its precision)
  }
  // model.fuse: a ReLU whose input only it reads is taken into the layer before it where that layer can (batchnorm,
  // add: Layer::fuse_relu), which then writes the ReLU's output buffer; the passes skip the ReLU. And an identity add
  // whose input only it reads takes no forward pass of its own: the batchnorm before it adds the skip input as it
  // writes its output (with the ReLU fused into the add, if any) into the add's buffer (Layer::take_add; the add's
  // backward runs as it is). Off: every layer runs on its own (the default of a Model; set before the first pass, and
  // again after set_layout, which decides where a batchnorm can take an add). activation(i) of a layer that took a
  // ReLU or an add in is empty (its output is theirs). A range may not split a fused pair.
  // adds: whether the adds' sums are taken in too (model.fuse_add; the ReLUs alone without).
  void set_fusion(bool on, bool adds = true);
  bool fused(size_t i) const { return layers_.at(i)->fused_relu(); }   // layer i took in the ReLU at i + 1
  bool took_add(size_t i) const { return layers_.at(i)->took_add(); }  // layer i took in the add at i + 1
  // model.layout: the activations that only layers able to take oneDNN's channel-blocked layout (a blocked convolution,
  // batchnorm, ReLU, add, pooling: Layer::layout_rule) produce and read are kept in it (nChw{block}c; block 0: the
  // CPU's, cpu_channel_block()), so no reorder runs between those layers; the rest stay plain NCHW (the input batch,
  // what a flatten or fc reads, a tensor whose channels are no multiple of the block). Off: all plain (the default of
  // a Model). On a GPU in fp32 and tf32 the model stays plain. Results are the plain layout's bit for bit. Set
  // before the first pass, after set_math.
  // compute_acts (model.activations: auto): in a bf16 model (on a GPU or the simulated device also an fp16 one) those
  // activations and their gradients are also kept in the 16-bit type the convolutions read them in, so that no
  // conversion runs between those layers and every pass over them moves half the bytes (each layer computes in fp32
  // and rounds once as it stores; the batchnorm statistics, the loss and everything plain stay fp32). The CPU keeps
  // them blocked; a GPU and the simulated device channels-last (kNhwc), what tensor cores read (a layer without NHWC
  // kernels runs on plain copies: Layer::takes_nhwc). Off, or another precision: fp32.
  void set_layout(bool on, int block = 0, bool compute_acts = false);
  int layout(size_t i) const { return layout_.at(i); }  // activation i's layout: its block, or 0 (plain)
  DType dtype(size_t i) const { return dtype_.at(i); }  // activation i's element type (and its gradient's)
  // The buffers the activations' gradients share in a backward pass (a few, however deep the model).
  size_t gradient_buffers() const { return grad_buffers_.size(); }

  // x: [N, input...]; returns the last layer's output (the logits). Evaluation (ctx.train false) keeps only the outputs
  // an add reads again and the last one: activation(i) of the others is not kept.
  const Tensor& forward(const Tensor& x, const StepContext& ctx) { return forward_to(x, layers_.size(), ctx); }
  // dlogits: gradient w.r.t. the logits; fills every parameter's grad. Calls the hook after each layer, last to first.
  void backward(const Tensor& x, const Tensor& dlogits) { backward_from(x, layers_.size(), dlogits); }
  // Layers [0, end) only (model parallelism runs the rest through the ranges below): returns layer end-1's output.
  const Tensor& forward_to(const Tensor& x, size_t end, const StepContext& ctx) {
    return forward_range(x, 0, end, ctx, nullptr);
  }
  // Backward of layers end-1 .. 0, given dout, the gradient w.r.t. layer end-1's output.
  void backward_from(const Tensor& x, size_t end, const Tensor& dout) {
    backward_range(x, 0, end, dout, nullptr, nullptr);
  }

  // Stands in for layer i of a range (model parallelism: a layer split over the ranks, with its exchange): runs it on
  // in into out (sized already), or returns false to let the layer run as it is.
  using ForwardRunner = std::function<bool(size_t i, const Tensor& in, Tensor& out)>;
  using BackwardRunner =
      std::function<bool(size_t i, const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din)>;
  // Layers [begin, end) on x, the input of layer begin (any batch size): the one layer loop every part of a step runs
  // through. Returns layer end-1's output.
  const Tensor& forward_range(const Tensor& x, size_t begin, size_t end, const StepContext& ctx,
                              const ForwardRunner& run);
  // Backward of layers end-1 .. begin after forward_range(x, begin, end): dout is the gradient w.r.t. layer end-1's
  // output; dx (resized to x's shape), when given, receives the gradient w.r.t. x. An add whose source lies below begin
  // is refused.
  void backward_range(const Tensor& x, size_t begin, size_t end, const Tensor& dout, Tensor* dx,
                      const BackwardRunner& run);

  // Called with the layer index once backward has queued that layer's parameter gradients, and the event after which
  // they are final (on the CPU: already).
  using GradReadyHook = std::function<void(size_t layer_index, const Event& ready)>;
  void set_grad_ready_hook(GradReadyHook hook) { hook_ = std::move(hook); }
  // Per-layer wall time, accumulated over forward/backward calls while set (profiling: each layer's work is waited for;
  // nullptr turns it off).
  struct LayerTimes {
    std::vector<double> forward_s, backward_s;  // [size()]
  };
  void set_layer_times(LayerTimes* t);
  const LayerTimes* layer_times() const { return times_; }

  const Tensor& activation(size_t i) const { return acts_.at(i); }  // layer i's output of the last forward
  std::vector<Param> params();                                      // in layer order
  std::vector<std::pair<std::string, Tensor*>> state();             // non-trainable state (running statistics)
  int64_t num_params();
  void init_params(uint64_t seed);  // seeded, layer by layer, on the host (then moved to the model's device)
  std::string summary();            // one line per layer: name, kind, output shape, parameters
  // For an error message: the first place, layer by layer, holding a NaN or infinity — the input batch, then each
  // layer's weights, output and parameter gradients ("layer fc1 (fc): weights fc1.weight hold inf at 17"); "" if none.
  // (An error path, not a per-step check: device tensors are copied to the host to be read.)
  std::string first_nonfinite(const Tensor* input);
  // Skip gradients a backward pass adds inside a layer's own data-gradient pass (Layer::accumulate_input_grad) rather
  // than in a summing pass of their own (the GPU's convolutions after an identity add).
  size_t skip_sums_in_layers() const;

 private:
  Shape input_;
  int64_t outputs_ = 0;
  std::vector<LayerPtr> layers_;
  std::vector<Tensor> acts_;  // acts_[i]: output of layer i
  // The gradient w.r.t. the output of layer i is grad(i): buffer grad_slot_[i] of grad_buffers_. Gradients whose
  // lives in a backward pass do not overlap share a buffer (plan_grad_buffers), so a pass holds a few activations'
  // worth of them rather than one per layer.
  std::vector<Tensor> grad_buffers_;
  std::vector<size_t> grad_slot_;
  Tensor& grad(size_t i) { return grad_buffers_[grad_slot_[i]]; }
  void plan_grad_buffers();
  // accum_[j]: the add whose in-place skip gradient grad(j) continues in its buffer (layer j + 1 adds its input
  // gradient into it: Layer::accumulate_input_grad), or -1 where layer j + 1 writes grad(j) and the add's gradient is
  // summed into it after.
  std::vector<int64_t> accum_;
  std::vector<int64_t> skip_;       // skip_[i]: the layer whose output layer i also reads (add), or -1
  std::vector<Tensor> skip_grads_;  // skip_grads_[i]: layer i's gradient w.r.t. that output, added once it is written
  std::vector<bool> skip_source_;   // layer i's output is read again by a later add
  std::vector<int> layout_;         // layout_[i]: activation i's layout (set_layout)
  std::vector<DType> dtype_;        // dtype_[i]: activation i's element type (set_layout)
  Tensor eval_[2];                  // evaluation: outputs no backward and no add needs, in turn (two layers' worth)
  void check_range(size_t begin, size_t end, const char* pass) const;  // ranges keep fused pairs whole
  bool fuse_adds_ = false;                                             // model.fuse and model.fuse_add (set_fusion)
  // The adds' sums taken into the batchnorms before them (set_fusion's second half, redone by set_layout).
  void take_adds();
  // The activation layer i's forward writes: its own, or a fused ReLU's, or an add's (or that add's ReLU's) it took in.
  size_t out_of(size_t i) const;
  // Layer i's skip gradient is read from grad(i - 1) in a backward pass over [begin, ..) rather than copied
  // (Layer::skip_grad_is_input_grad; no layer below i writes grad(i - 1) in that pass).
  bool skip_grad_in_place(size_t i, size_t begin) const;
  GradReadyHook hook_;
  LayerTimes* times_ = nullptr;
  Exec* exec_;
};

}  // namespace octet
