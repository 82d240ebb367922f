// Device parity of a training step's own kernels (built into octet_sim_tests and octet_cuda_tests beside
// test_device.cpp): the loss head, fp16's unscale pass, the fused optimizer update and its one-step-late check, uint8
// batches cropped, flipped and normalized on the device, and the exchange's codec phases timed on the device.
#include <chrono>
#include <cstring>
#include <limits>
#include <thread>

#include "compress/codec.h"
#include "compress/codec_device.h"
#include "core/device.h"
#include "core/launch.h"
#include "core/sim.h"
#include "core/timer.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "layers/softmax_ce.h"
#include "optim/loss_scale.h"
#include "optim/optimizer.h"
#include "optim/optimizer_kernels.h"
#include "tests/device_util.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

TEST_CASE("the loss scaler's unscale pass on the device: every gradient divided, an overflow flagged on any tensor",
          "[cuda][precision]") {
  Exec& ex = dev();
  LossScaler s({1024.f, 2.f, 0.5f, 3}, ex);
  Tensor a = random_tensor({1000}, 5, 1024.f), b = random_tensor({7}, 6, 1024.f);
  Tensor ad = a.to(kDev), bd = b.to(kDev), ga(a.shape(), kDev), gb(b.shape(), kDev);
  std::vector<Param> ps = {{"a", &ga, &ad}, {"b", &gb, &bd}};
  CHECK(!s.unscale(ps));
  const Tensor ah = ad.to(Device::CPU);
  for (int64_t i = 0; i < a.numel(); ++i) REQUIRE(ah.data()[i] == a.data()[i] / 1024.f);
  b.data()[3] = INFINITY;
  bd = b.to(kDev);
  CHECK(s.unscale(ps));
  b.data()[3] = 1.f;
  bd = b.to(kDev);
  CHECK(!s.unscale(ps));  // the flag is cleared after each read
}

TEST_CASE("softmax cross-entropy on the GPU: the CPU's loss, hits and gradient, bad labels named", "[cuda][parity]") {
  Exec& ex = dev();
  const Tensor logits = random_tensor({64, 10}, 5, 3.0f);
  std::vector<int32_t> labels(64);
  for (int i = 0; i < 64; ++i) labels[i] = (i * 7) % 10;
  Buffer<int32_t> labels_d(64, kDev);
  Tensor lab_f = Tensor::wrap(reinterpret_cast<float*>(labels.data()), {64});  // 4-byte values: copied as they are
  Tensor lab_d = Tensor::wrap(reinterpret_cast<float*>(labels_d.data()), {64}, kDev);
  lab_d.copy_from(lab_f);
  SoftmaxCrossEntropy cpu, gpu;
  const LossResult rc = cpu.forward(logits, labels.data());
  const LossResult rg = gpu.forward(logits.to(kDev), labels_d.data(), ex);
  CHECK(rg.count == rc.count);
  CHECK(rg.correct == rc.correct);
  CHECK(rg.correct5 == rc.correct5);
  CHECK(rc.correct5 > rc.correct);
  CHECK(rg.loss_sum == Approx(rc.loss_sum).epsilon(1e-12));
  Tensor dc(logits.shape()), dg(logits.shape(), kDev);
  cpu.backward(dc, 1.0f / 64);
  gpu.backward(dg, 1.0f / 64, ex);
  ex.sync(ex.compute());
  check_close(dg, dc, 1e-6, "dlogits");
  labels[5] = 12;
  lab_d.copy_from(lab_f);
  CHECK_THROWS_WITH(gpu.forward(logits.to(kDev), labels_d.data(), ex),
                    Catch::Contains("label 12 of sample 5 outside [0,10)"));
}

TEST_CASE("the fused SGD and RMSProp updates match the CPU reference and flag non-finite weights per tensor",
          "[cuda][optim]") {
  // Three tensors in one launch: one over several chunks, a small one, and a range of a third (model parallelism's
  // rows), each with its own lr and decay multipliers.
  const std::vector<int64_t> sizes = {2 * kUpdateChunk + 3, 17, 40000};
  const int64_t off = 1000, count = 30000;  // the third tensor's updated range
  Exec& ex = dev();
  for (int variant = 0; variant < 4; ++variant) {
    INFO("variant " << variant);
    std::vector<Tensor> w, g, s, wd, gd, sd;
    for (size_t i = 0; i < sizes.size(); ++i) {
      w.push_back(random_tensor({sizes[i]}, 1 + 3 * i));
      g.push_back(random_tensor({sizes[i]}, 2 + 3 * i));
      s.push_back(random_tensor({sizes[i]}, 3 + 3 * i, 0.1f));
      if (variant == 3)
        for (int64_t k = 0; k < sizes[i]; ++k) s[i].data()[k] = std::abs(s[i].data()[k]);
      wd.push_back(w[i].to(kDev)), gd.push_back(g[i].to(kDev)), sd.push_back(s[i].to(kDev));
    }
    auto table = [&](std::vector<Tensor>& W, std::vector<Tensor>& G, std::vector<Tensor>& S) {
      std::vector<UpdateSlice> t;
      for (size_t i = 0; i < sizes.size(); ++i) {
        const int64_t o = i == 2 ? off : 0, n = i == 2 ? count : sizes[i];
        t.push_back({W[i].data() + o, G[i].data() + o, variant == 0 ? nullptr : S[i].data() + o, n,
                     1.f + 0.5f * static_cast<float>(i), i == 1 ? 0.f : 1.f});
      }
      return t;
    };
    const std::vector<UpdateSlice> host = table(w, g, s), devt = table(wd, gd, sd);
    const std::vector<UpdateChunk> chunks = update_chunks(host);
    CHECK(chunks.size() == 3 + 1 + 1);
    Buffer<UpdateSlice> slices_d(devt.size(), kDev);
    Buffer<UpdateChunk> chunks_d(chunks.size(), kDev);
    Buffer<uint32_t> flags_d(3, kDev);
    copy_sync(kDev, slices_d.data(), devt.data(), devt.size() * sizeof(UpdateSlice), CopyKind::HostToDevice);
    copy_sync(kDev, chunks_d.data(), chunks.data(), chunks.size() * sizeof(UpdateChunk), CopyKind::HostToDevice);
    zero_sync(kDev, flags_d.data(), 3 * sizeof(uint32_t));
    std::vector<uint32_t> flags(3, 0);
    const int64_t nc = static_cast<int64_t>(chunks.size());
    for (int step = 0; step < 3; ++step) {
      if (variant < 3) {
        const SgdHyper h{0.1f, variant == 0 ? 0.f : 0.9f, 1e-4f, variant == 2};
        sgd_multi_cpu(host.data(), chunks.data(), nc, h, flags.data(), Stream{});
        launch_twin("sgd", sgd_multi_cpu, OCTET_CUDA_TWIN(sgd_multi_cuda), ex.compute(), slices_d.data(),
                    chunks_d.data(), nc, h, flags_d.data());
      } else {
        const RmspropHyper h{0.01f, 0.9f, 1e-8f, 1e-4f};
        rmsprop_multi_cpu(host.data(), chunks.data(), nc, h, flags.data(), Stream{});
        launch_twin("rmsprop", rmsprop_multi_cpu, OCTET_CUDA_TWIN(rmsprop_multi_cuda), ex.compute(), slices_d.data(),
                    chunks_d.data(), nc, h, flags_d.data());
      }
    }
    ex.sync(ex.compute());
    for (size_t i = 0; i < sizes.size(); ++i) {
      check_close(wd[i], w[i], kDev == Device::Sim ? 0 : 1e-6, "weights " + std::to_string(i));
      check_close(sd[i], s[i], kDev == Device::Sim ? 0 : 1e-6, "state " + std::to_string(i));
    }
    // Outside the third tensor's range nothing moved.
    const Tensor third = random_tensor({sizes[2]}, 7);
    CHECK(w[2].data()[off - 1] == third.data()[off - 1]);
    CHECK(w[2].data()[off + count] == third.data()[off + count]);
    CHECK(w[2].data()[off] != third.data()[off]);
    CHECK(flags == std::vector<uint32_t>{0, 0, 0});
    std::vector<uint32_t> back(3);
    copy_sync(kDev, back.data(), flags_d.data(), 3 * sizeof(uint32_t), CopyKind::DeviceToHost);
    CHECK(back == std::vector<uint32_t>{0, 0, 0});
  }
  // An infinite gradient in the second tensor leaves an infinite weight there: that tensor's flag alone, on both.
  std::vector<Tensor> w, g, v;
  for (int64_t n : {int64_t{300}, int64_t{8}})
    w.push_back(Tensor({n})), g.push_back(Tensor({n})), v.push_back(Tensor({n}));
  g[1].data()[3] = std::numeric_limits<float>::infinity();
  std::vector<Tensor> wd = {w[0].to(kDev), w[1].to(kDev)}, gd = {g[0].to(kDev), g[1].to(kDev)},
                      vd = {v[0].to(kDev), v[1].to(kDev)};
  const std::vector<UpdateSlice> host = {{w[0].data(), g[0].data(), v[0].data(), 300},
                                         {w[1].data(), g[1].data(), v[1].data(), 8}};
  const std::vector<UpdateSlice> devt = {{wd[0].data(), gd[0].data(), vd[0].data(), 300},
                                         {wd[1].data(), gd[1].data(), vd[1].data(), 8}};
  const std::vector<UpdateChunk> chunks = update_chunks(host);
  Buffer<UpdateSlice> slices_d(2, kDev);
  Buffer<UpdateChunk> chunks_d(chunks.size(), kDev);
  Buffer<uint32_t> flags_d(2, kDev);
  copy_sync(kDev, slices_d.data(), devt.data(), 2 * sizeof(UpdateSlice), CopyKind::HostToDevice);
  copy_sync(kDev, chunks_d.data(), chunks.data(), chunks.size() * sizeof(UpdateChunk), CopyKind::HostToDevice);
  zero_sync(kDev, flags_d.data(), 2 * sizeof(uint32_t));
  std::vector<uint32_t> flags(2, 0), back(2);
  const SgdHyper h{0.1f, 0.9f};
  sgd_multi_cpu(host.data(), chunks.data(), 2, h, flags.data(), Stream{});
  launch_twin("sgd", sgd_multi_cpu, OCTET_CUDA_TWIN(sgd_multi_cuda), ex.compute(), slices_d.data(), chunks_d.data(),
              int64_t{2}, h, flags_d.data());
  ex.sync(ex.compute());
  copy_sync(kDev, back.data(), flags_d.data(), 2 * sizeof(uint32_t), CopyKind::DeviceToHost);
  CHECK(flags == std::vector<uint32_t>{0, 1});
  CHECK(back == std::vector<uint32_t>{0, 1});
}

TEST_CASE("an optimizer on the device checks its update one call late, naming the tensor", "[cuda][optim]") {
  Exec& ex = dev();
  Tensor a = Tensor({4}).to(kDev), ga = Tensor({4}).to(kDev), b = Tensor({3}).to(kDev);
  Tensor gb_host({3});
  gb_host.data()[1] = std::numeric_limits<float>::quiet_NaN();
  Tensor gb = gb_host.to(kDev);
  OptimizerConfig c;
  c.momentum = 0.9f;
  Optimizer opt(c, {{"a.weight", &a, &ga}, {"b.weight", &b, &gb}}, ex);
  opt.step(0.1f);  // queued: nothing waits for it
  CHECK_THROWS_WITH(opt.check(), Catch::Contains("non-finite values in b.weight"));
  opt.check();  // reported once
  // A fresh update with finite gradients checks clean; the next step() checks the one before it.
  gb.zero(ex.compute());
  Tensor b2 = Tensor({3}).to(kDev);
  Optimizer clean(c, {{"a.weight", &a, &ga}, {"b.weight", &b2, &gb}}, ex);
  clean.step(0.1f);
  clean.step(0.1f);
  clean.check();
}

TEST_CASE("uint8 batches cropped, flipped and normalized on the device are the host's batches bit for bit",
          "[cuda][data]") {
  Exec& ex = dev();
  Normalize norm;
  norm.mean = {0.5f, 0.4f, 0.3f}, norm.std = {0.2f, 0.25f, 0.3f};
  auto data = make_synthetic(12, {3, 9, 7}, 4, 5, norm);
  const std::vector<int64_t> idx = {3, 1, 7, 0, 11};
  const uint64_t key = epoch_key(9, 2);
  auto same = [&](const uint64_t* k, const std::string& what) {
    INFO(what);
    Batch host, raw;
    assemble_batch(*data, idx, host, k, false);
    assemble_batch(*data, idx, raw, k, true);
    REQUIRE(raw.affine != nullptr);
    CHECK(raw.x.numel() == 0);
    DeviceBatch d;
    to_device(raw, d, ex, ex.copy());
    ex.sync(ex.copy());
    CHECK(to_vector(d.x.to(Device::CPU)) == to_vector(host.x));
    CHECK(d.x.shape() == host.x.shape());
    std::vector<int32_t> labels(idx.size());
    copy_sync(kDev, labels.data(), d.labels.data(), 4 * labels.size(), CopyKind::DeviceToHost);
    CHECK(labels == std::vector<int32_t>(host.labels.data(), host.labels.data() + idx.size()));
  };
  same(nullptr, "evaluation: no augmentation");
  Augment aug;
  aug.crop_padding = 2, aug.flip = true;
  data->set_augment(aug);
  same(&key, "training: crop_padding 2 and flip");
  same(nullptr, "evaluation of an augmented set");
  // Caffe's mean image (subtracted where the pixel comes from, mirrored after).
  Normalize mean_image = norm;
  mean_image.mean_image = true, mean_image.pixel_mean = data->pixel_mean();
  data->set_normalize(mean_image);
  aug.crop_padding = 0;
  data->set_augment(aug);
  same(&key, "training: a mean image and flip");
}

// The phase tests' codec op: dynamic_tree8 over n values on the device, and its buffers.
struct PhaseOp {
  Exec& ex = dev();
  static constexpr int64_t n = 1 << 18;
  CodecPtr c = make_codec(CodecParams{.method = "dynamic_tree8"});
  Tensor x = random_tensor({n}, 3).to(kDev), y = Tensor({n}, kDev);
  Buffer<uint8_t> out{c->max_bytes(n), kDev};
  size_t encode() {
    return c->encode({x.data(), static_cast<size_t>(n), kDev}, {out.data(), out.size(), kDev}, {1, nullptr}, ex);
  }
};

TEST_CASE("an exchange's codec phases are timed on the device: the outermost scope sums its spans by phase",
          "[cuda][codec]") {
  PhaseOp op;
  Exec& ex = op.ex;
  {
    DevicePhaseSpan outside(ex, true);
    CHECK(!outside.active());  // no scope: the caller keeps the host's time
    DevicePhaseSpan host(Exec::host(), true);
    CHECK(!host.active());
  }
  CodecChecksDeferred outer(ex);
  size_t bytes = 0;
  {
    CodecChecksDeferred inner(ex);  // (reduce_mean's scope inside GradSync's)
    {
      DevicePhaseSpan sp(ex, true);
      CHECK(sp.active());
      bytes = op.encode();
    }
    const DevicePhaseTimes t = inner.finish();
    CHECK(t.compress_s == 0);  // an inner scope's phases are summed by the outermost one
    CHECK(t.decompress_s == 0);
  }
  {
    DevicePhaseSpan sp(ex, false);
    op.c->decode({op.out.data(), bytes, kDev}, {op.y.data(), static_cast<size_t>(op.n), kDev}, false, ex);
  }
  CHECK_THROWS([&] {  // left by an exception: nothing recorded
    DevicePhaseSpan sp(ex, true);
    OCTET_THROW("on its way");
  }());
  double queued = 0;
  if (kDev == Device::Sim) {  // a kernel the host only queues: the device's time counts, not the host's
    const double t0 = now_seconds();
    {
      DevicePhaseSpan sp(ex, false);
      sim::launch(sim_queue(ex.comm()), "a slow kernel",
                  [] { std::this_thread::sleep_for(std::chrono::milliseconds(30)); });
    }
    queued = now_seconds() - t0;
  }
  const DevicePhaseTimes t = outer.finish();
  CHECK(t.compress_s > 0);
  CHECK(t.decompress_s > 0);
  if (kDev == Device::Sim) {
    CHECK(queued < 0.02);
    CHECK(t.decompress_s >= 0.029);
  }
  CodecChecksDeferred again(ex);  // a finished scope's sums do not carry over
  const DevicePhaseTimes z = again.finish();
  CHECK(z.compress_s == 0);
  CHECK(z.decompress_s == 0);
}

TEST_CASE("phases without codec checks wait for nothing: they count at the next exchange that waits for its checks",
          "[cuda][codec]") {
  // (fp32's node sums, powersgd's products)
  PhaseOp op;
  Exec& ex = op.ex;
  op.encode();  // (first uses: the code book's copy to the device)
  ex.sync(ex.comm());
  const uint64_t w0 = device_host_waits();
  {
    CodecChecksDeferred plain(ex);
    {
      DevicePhaseSpan sp(ex, true);
      launch_twin("feedback add", feedback_add_cpu, OCTET_CUDA_TWIN(feedback_add_cuda), ex.comm(), op.y.data(),
                  static_cast<const float*>(op.x.data()), static_cast<const float*>(op.x.data()), op.n);
    }
    const DevicePhaseTimes t0 = plain.finish();
    CHECK(t0.compress_s == 0);
    CHECK(device_host_waits() == w0);
  }
  CodecChecksDeferred next(ex);
  {
    DevicePhaseSpan sp(ex, false);
    op.encode();
  }
  const DevicePhaseTimes t1 = next.finish();
  CHECK(device_host_waits() == w0 + 1);
  CHECK(t1.compress_s > 0);  // (the first scope's)
  CHECK(t1.decompress_s > 0);
}
