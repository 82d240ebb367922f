// `octet bench conv`: one convolution's training work (forward, backward data, backward weights) on the CPU in the
// plain layout, in oneDNN's blocked layouts behind reorders (plain activations around it), and on channel-blocked
// activations (model.layout: its neighbours keep them blocked, no reorders), timed in the same run: the measurement
// behind conv's cpu_layout rule (docs/design_notes.md).
#include <cstdio>

#include "core/layout.h"
#include "core/rng.h"
#include "core/timer.h"
#include "layers/conv2d.h"
#include "tools/bench.h"
#include "tools/flags.h"

namespace octet {

int bench_conv(const std::vector<std::string>& args) {
  Flags f("octet bench conv", "",
          {{"in", "C", "input channels", "16"},
           {"out", "C", "output channels", "16"},
           {"size", "H", "input height and width", "32"},
           {"kernel", "K", "kernel size", "3"},
           {"padding", "P", "zero padding (default K/2)", ""},
           {"stride", "S", "stride", "1"},
           {"batch", "N", "batch", "128"},
           {"reps", "N", "repetitions; the best time of each layout is kept", "5"}});
  if (f.parse_or_usage(args)) return 0;
  Conv2dParams p;
  p.in_channels = f.integer("in", 1, 1 << 16);
  p.out_channels = f.integer("out", 1, 1 << 16);
  p.kernel = f.integer("kernel", 1, 64);
  p.stride = f.integer("stride", 1, 64);
  p.padding = f.given("padding") ? f.integer("padding", 0, p.kernel - 1) : p.kernel / 2;
  p.bias = false;
  const int64_t h = f.integer("size", p.kernel, 1 << 14), n = f.integer("batch", 1, 1 << 16);
  const int reps = static_cast<int>(f.integer("reps", 1, 1000));
  const Tensor x = [&] {
    Tensor t({n, p.in_channels, h, h});
    Rng rng(1);
    for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = rng.normal();
    return t;
  }();
  // Variants: plain; blocked behind reorders; blocked activations (where the channels fill this CPU's blocks).
  const int B = cpu_channel_block();
  const Shape out_shape = Conv2d("shape", p).output_shape(x.shape());
  const bool acts = p.in_channels % B == 0 && p.out_channels % B == 0;
  const int variants = acts ? 3 : 2;
  Tensor xb;
  if (acts) from_plain(x, B, xb);
  double best[3] = {1e30, 1e30, 1e30};
  const char* names[3] = {"plain", "blocked", "blocked activations"};
  for (int r = 0; r < reps; ++r)
    for (int b = 0; b < variants; ++b) {  // alternating, so that a drifting machine affects all alike
      p.cpu_layout = b ? ConvLayout::Blocked : ConvLayout::Plain;
      Conv2d conv(names[b], p);
      Rng rng(2);
      conv.init_params(rng);
      if (b == 2) conv.set_layout({B, B, 0});
      const Tensor& in = b == 2 ? xb : x;
      Tensor y(out_shape), dx(x.shape());
      const Tensor dy = y;  // zeros: the work does not depend on the values
      conv.forward(in, y, StepContext{});
      conv.backward(in, y, dy, &dx);  // primitives built and memory touched outside the timing
      const double t0 = now_seconds();
      conv.forward(in, y, StepContext{});
      conv.backward(in, y, dy, &dx);
      best[b] = std::min(best[b], now_seconds() - t0);
    }
  Conv2d rule("auto", Conv2dParams{p.in_channels, p.out_channels, p.kernel, p.stride, p.padding, false});
  std::printf("conv %lld->%lld k%lld s%lld p%lld on %lldx%lld, batch %lld: plain %.2f ms, blocked %.2f ms (%.2fx)",
              static_cast<long long>(p.in_channels), static_cast<long long>(p.out_channels),
              static_cast<long long>(p.kernel), static_cast<long long>(p.stride), static_cast<long long>(p.padding),
              static_cast<long long>(h), static_cast<long long>(h), static_cast<long long>(n), 1e3 * best[0],
              1e3 * best[1], best[0] / best[1]);
  if (acts) std::printf(", blocked activations (nChw%dc) %.2f ms (%.2fx)", B, 1e3 * best[2], best[0] / best[2]);
  std::printf("; cpu_layout auto picks %s\n", rule.cpu_blocked() ? "blocked" : "plain");
  return 0;
}

}  // namespace octet
