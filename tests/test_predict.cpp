// The predictive speedup model: the paper's 4-GPU AlexNet prediction from its inputs, hand-computed exchange costs
// for each algorithm, the overlap timeline, the sub-batch pipeline, and profile-file errors.
#include <catch2/catch.hpp>

#include <fstream>

#include "test_util.h"
#include "tools/predict.h"

using namespace octet;

namespace {

LayerProfile layer(const std::string& name, const std::string& kind, double f, double b, int64_t params, int64_t in = 0,
                   int64_t out = 0) {
  LayerProfile L;
  L.name = name, L.set_kind(kind), L.forward_ms = f, L.backward_ms = b, L.params = params, L.in_per_sample = in,
  L.out_per_sample = out;
  return L;
}

CodecProfile codec(const std::string& name, double ratio, const std::string& alg = "scatter_allgather") {
  CodecProfile c;
  c.name = name, c.algorithm = alg, c.ratio_conv = c.ratio_fc = c.ratio_other = ratio, c.ratio_act = ratio;
  return c;
}

}  // namespace

TEST_CASE("predict: the paper's 4-GPU AlexNet prediction from its inputs (3.53x at 32-bit, 3.67x at 8-bit)",
          "[predict]") {
  const Profile p = read_profile(test::source_dir() + "/configs/predict/dettmers2016_alexnet_4gpu.yaml");
  REQUIRE(p.codecs.size() == 2);
  const Link link{5.0, 30.0};  // not used where the paper gives the penalties
  const Terms t32 = predict_model_parallel(p, p.codecs[0], link, 4, 4),
              t8 = predict_model_parallel(p, p.codecs[1], link, 4, 4);
  CHECK(t32.t_total == Approx(104.1));
  CHECK(t32.t_fc == Approx(6.5));
  CHECK(t32.t_fc_parallel == Approx(3.34));
  CHECK(t32.fc_penalty == Approx(6.81));
  CHECK(t8.fc_penalty == Approx(2.55));
  CHECK(t32.speedup() == Approx(3.53).epsilon(0.02));
  CHECK(t8.speedup() == Approx(3.67).epsilon(0.02));
  // The printed table carries the same figures.
  const std::string table = prediction_table(p, link, 4, 4);
  CHECK_THAT(table, Catch::Contains("3.53x") && Catch::Contains("3.67x"));
}

TEST_CASE("predict: data-parallel exchange costs per algorithm, by hand", "[predict]") {
  Profile p;
  p.batch = 32;
  p.min_numel = 1000;
  p.layers = {layer("conv", "conv", 1.0, 2.0, 1000000), layer("fc", "fc", 0.25, 0.5, 1000000)};
  const Link link{1.0, 10.0};  // 1e6 bytes per ms, 0.01 ms per message
  // scatter_allgather, N = 2, ratio 0.25: 2 messages + 2(N-1)/N * 1e6 bytes = 0.02 + 1.0 ms per layer.
  CodecProfile c8 = codec("dynamic_tree8", 0.25);
  CHECK(dp_penalty_ms(p, c8, link, 2, false, 0, 2) == Approx(2 * 1.02));
  // Overlap: fc's sync starts at 0.5 ms (its backward) and ends at 1.52; conv's backward ends at 2.5, its sync at
  // 3.52: 1.02 ms exposed.
  CHECK(dp_penalty_ms(p, c8, link, 2, true, 0, 2) == Approx(1.02));
  // Codec time: encode 4e6*(1 + 1/N) bytes at 6 GB/s and decode 4e6*(2 - 1/N) at 6 GB/s: 1.0 + 1.0 ms more per layer.
  c8.encode_gbs = c8.decode_gbs = 6.0;
  CHECK(dp_penalty_ms(p, c8, link, 2, false, 1, 2) == Approx(1.02 + 2.0));
  // allgather, N = 4, ratio 0.01: 3 messages + 3 payloads of 4e4 bytes = 0.03 + 0.12 ms.
  CHECK(dp_penalty_ms(p, codec("adacomp", 0.01, "allgather"), link, 4, false, 1, 2) == Approx(0.15));
  // Under min_numel: fp32 MPI_Allreduce, log2(N) rounds: 2 * 0.01 + 2 * 3/4 * 4000 bytes.
  p.layers[1].params = 999;
  CHECK(dp_penalty_ms(p, c8, link, 4, false, 1, 2) == Approx(0.02 + 1.5 * 3996 / 1e6));
  // A layer's tensors sync one by one: a 999000-value weight through the codec, its 1000-value bias as fp32
  // (min_numel 1001): 0.02 + 0.999 ms, and 2 * 0.01 + 1.0 * 4000 bytes.
  p.min_numel = 1001;
  p.layers[1].tensors = {999000, 1000};
  CHECK(dp_penalty_ms(p, codec("linear8", 0.25), link, 2, false, 1, 2) == Approx(0.02 + 0.999 + 0.01 + 4000 / 1e6));
  // Two layers' tensors, all under min_numel: one fused allreduce (N = 2: one 0.01 ms message, all 8e6 bytes), or
  // one each (fuse_small false: four messages); with overlap one a layer (the layer's bucket).
  p.min_numel = 1000000;
  p.layers[0].tensors = {999000, 1000};
  p.layers[1].tensors = {999000, 1000};
  p.layers[0].params = p.layers[1].params = 1000000;
  const CodecProfile fp32 = codec("none", 1.0);
  CHECK(dp_penalty_ms(p, fp32, link, 2, false, 0, 2) == Approx(0.01 + 8.0));
  // (overlap: fc's 4.01 ms from 0.5 to 4.51, conv's from there to 8.52, backward done at 2.5)
  CHECK(dp_penalty_ms(p, fp32, link, 2, true, 0, 2) == Approx(8.52 - 2.5));
  p.fuse_small = false;
  CHECK(dp_penalty_ms(p, fp32, link, 2, false, 0, 2) == Approx(4 * 0.01 + 8.0));
  p.fuse_small = true;
  p.layers[0].tensors.clear(), p.layers[1].tensors.clear();
  p.min_numel = 1001;
  // Terms: speedup = N * T_alone / (T_total + exposed), T_alone = the layers' sum unless profiled separately.
  p.layers[1].params = 1000000;
  const Terms t = predict_data_parallel(p, codec("none", 1.0), Link{1e9, 0}, 2, false);
  CHECK(t.t_total == Approx(3.75));
  CHECK(t.speedup() == Approx(2.0).epsilon(1e-6));
  p.step_alone_ms = 2.5;  // ranks slowed by sharing cores while profiled
  CHECK(predict_data_parallel(p, codec("none", 1.0), Link{1e9, 0}, 2, false).speedup() == Approx(2 * 2.5 / 3.75));
  p.straggler = 1.2;  // every synchronous step waits for the slowest rank
  CHECK(predict_data_parallel(p, codec("none", 1.0), Link{1e9, 0}, 2, false).speedup() ==
        Approx(2 * 2.5 / (1.2 * 3.75)));
}

TEST_CASE("predict: nodes of several ranks, flat vs two-level exchange, by hand", "[predict]") {
  const CodecProfile c8 = codec("dynamic_tree8", 0.25);
  Link l{1.0, 0.0};  // each node's link: 1e6 bytes per ms; no latency
  l.ranks_per_node = 2;
  l.node_bandwidth_gbs = 10.0;
  // 4 ranks as 2 nodes x 2, a 1e6-value tensor (4e6 fp32 bytes, 1e6 payload). Flat: each rank sends 2(N-1)/N = 1.5e6
  // payload bytes, 2/3 of them off the node, both ranks' through the link: 2e6 bytes = 2 ms (inside: 0.5e6 at
  // 10 GB/s = 0.05 ms, beside it).
  CHECK(tensor_sync_ms(1000000, WeightKind::Fc, c8, l, 4, 0) == Approx(2.0));
  // Two levels: the node's reduce-scatter and all-gather move (L-1)/L = 2e6 fp32 bytes each at 10 GB/s (0.4 ms);
  // the 5e5-value shard's payload (5e5 bytes) between 2 nodes, 2(M-1)/M = 1 of it per rank, at half the link each
  // (the two local ranks share it): 1 ms.
  l.two_level = true;
  CHECK(tensor_sync_ms(1000000, WeightKind::Fc, c8, l, 4, 0) == Approx(0.4 + 1.0));
  // One rank per node: the same as flat.
  Link one{1.0, 0.0};
  one.two_level = true;
  CHECK(tensor_sync_ms(1000000, WeightKind::Fc, c8, one, 4, 0) == Approx(1.5));
  // The table adds the two-level columns and names the best.
  Profile p;
  p.batch = 32;
  p.layers = {layer("fc", "fc", 1.0, 2.0, 1000000)};
  p.codecs = {codec("none", 1.0), c8};
  l.two_level = false;
  const std::string table = prediction_table(p, l, 4, 1);
  CHECK_THAT(table, Catch::Contains("nodes: 2 x 2 ranks") && Catch::Contains("2lvl speedup") &&
                        Catch::Contains("expected best data parallel exchange: dynamic_tree8, hierarchy two_level"));
}

TEST_CASE("predict: model parallelism pipelines the activation exchange against the FC compute", "[predict]") {
  Profile p;
  p.batch = 64;
  p.min_numel = 10;
  p.layers = {layer("conv", "conv", 4.0, 8.0, 0, 100, 1000), layer("fc1", "fc", 1.0, 2.0, 1000, 1000, 100),
              layer("relu", "relu", 0.25, 0.25, 0, 100, 100), layer("fc2", "fc", 0.5, 0.5, 100, 100, 10)};
  p.layers[1].slice_forward_ms = 0.3, p.layers[1].slice_backward_ms = 0.6;
  const Link link{1.0, 0.0};
  const CodecProfile c = codec("none", 1.0);
  const int N = 2, K = 4;
  const Terms t = predict_model_parallel(p, c, link, N, K);
  CHECK(t.t_fc == Approx(4.5));
  // fc2 has no slice figures: (forward, backward) / K (it has no update); the relu runs whole on N*B/K samples: x N /
  // K.
  const double comp_f = 0.3 + 0.25 * N / K + 0.5 / K, comp_b = 0.6 + 0.25 * N / K + 0.5 / K;
  CHECK(t.t_fc_parallel == Approx(comp_f + comp_b));
  // Forward each rank sends (N-1) x its B/K samples' worth: fc1 input 1000, fc2 input 100, logits 10 values per
  // sample; backward the two inputs' gradients over all N*B/K samples are summed by reduce-scatter, which sends
  // (N-1)/N of them. 4 bytes each at 1e6 bytes per ms.
  // Only the first one (fc1's input) travels while the previous sub-batch computes.
  const double s = (N - 1) * 64.0 / K * 4 / 1e6;
  const double xin = s * 1000, xf = s * (100 + 10), xb = 1.0 * (N - 1) / N * N * 64.0 / K * 4 / 1e6 * (1000 + 100);
  CHECK(t.fc_penalty == Approx(xin + (K - 1) * std::max(0.0, xin - comp_f - comp_b) + K * (xf + xb)));
  CHECK(t.conv_penalty == Approx(0.0));  // the conv layer has no parameters
  {  // With parameters, the conv gradients are exchanged after backward, as octet's model parallelism does it:
     // the upper conv layer's exchange does not hide behind the lower one's backward, as it would with overlap.
    Profile q = p;
    q.layers[0].params = 200000, q.layers[0].tensors = {200000};
    q.layers.insert(q.layers.begin(), layer("conv0", "conv", 4.0, 8.0, 0, 100, 100));
    const double blocking = dp_penalty_ms(q, c, link, N, false, 0, 2),
                 overlapped = dp_penalty_ms(q, c, link, N, true, 0, 2);
    CHECK(blocking > overlapped);
    CHECK(predict_model_parallel(q, c, link, N, K).conv_penalty == Approx(blocking));
  }
  CHECK(t.speedup() == Approx(N * 16.5 / (12.0 + K * (comp_f + comp_b) + t.fc_penalty)));
  {  // The next sub-batch's input also travels while the exchanges inside the FC part wait on their messages' latency
     // and the last rank's arrival, not beside their bytes. At 0.01 GB/s (100x the bytes' time above), 0.1 ms per
     // message and 0.05 ms arrival skew: each exchange has N-1 messages; 4 exchanges inside (fc2's input and the
     // logits gathered, both inputs' gradients summed), 5 waits for the last rank per sub-batch (those and the input).
    const Terms u = predict_model_parallel(p, c, Link{0.01, 100.0, 50.0}, N, K);
    const double lat = (N - 1) * 0.1, in = 100 * xin + lat, inside = 100 * (xf + xb) + 4 * lat;
    REQUIRE(in - comp_f - comp_b - 4 * lat - 4 * 0.05 > 0);  // partly exposed
    CHECK(u.fc_penalty ==
          Approx(in + (K - 1) * (in - comp_f - comp_b - 4 * lat - 4 * 0.05) + K * inside + K * 5 * 0.05));
  }
  {  // The activation exchanges' bandwidth, when given, carries their bytes (and only theirs): at 0.01 GB/s for the
     // gradients and 1 GB/s for the activations, the FC part costs what it did on the 1 GB/s link; the conv
     // gradients' exchange stays at 0.01 GB/s. The largest activation collective: fc1's input over N*B/K samples.
    Profile q = p;
    q.layers[0].params = 200000, q.layers[0].tensors = {200000};
    const Link split{0.01, 0.0, 0.0, 1.0};
    CHECK(split.act_gbs() == 1.0);
    CHECK(Link{0.01, 0.0}.act_gbs() == 0.01);
    const Terms u = predict_model_parallel(q, c, split, N, K);
    CHECK(u.fc_penalty == Approx(predict_model_parallel(q, c, link, N, K).fc_penalty));
    CHECK(u.conv_penalty == Approx(predict_model_parallel(q, c, Link{0.01, 0.0}, N, K).conv_penalty));
    CHECK(predict_data_parallel(q, c, split, N, false).conv_penalty ==
          Approx(predict_data_parallel(q, c, Link{0.01, 0.0}, N, false).conv_penalty));
    CHECK(largest_activation_exchange(q, N, K) == N * (64 / K) * 1000);
    CHECK(largest_activation_exchange(q, N, 1) == N * 64 * 1000);
    q.layers.resize(1);  // no FC part: no activation exchange
    CHECK(largest_activation_exchange(q, N, K) == 0);
  }
  // A slower link raises the penalty, a compressing codec lowers it again.
  const Terms slow = predict_model_parallel(p, c, Link{0.01, 0.0}, N, K);
  const Terms slow8 = predict_model_parallel(p, codec("linear8", 0.25), Link{0.01, 0.0}, N, K);
  CHECK(slow.fc_penalty > t.fc_penalty);
  CHECK(slow8.fc_penalty < slow.fc_penalty);
  CHECK(slow8.speedup() > slow.speedup());
}

TEST_CASE("predict: a bad profile file names the file, line and key", "[predict]") {
  test::TempDir dir;
  const std::string f = dir.file("p.yaml");
  auto write = [&](const std::string& text) { std::ofstream(f) << text; };
  write("batch: 8\nlayers:\n  - {name: a, kind: conv, forward_ms: 1}\ncodecs:\n  - {name: none, encode_gbs: fast}\n");
  CHECK_THROWS_WITH(read_profile(f),
                    Catch::Contains(f + ":5: codecs[0].encode_gbs: expected a finite number, got 'fast'"));
  write("batch: 8\nlayers:\n  - {name: a, kind: conv, forward_ms: -1}\ncodecs:\n  - {name: none}\n");
  CHECK_THROWS_WITH(read_profile(f), Catch::Contains(f + ":3: layers[0].forward_ms: must be >= 0"));
  write("batch: 8\nlayers:\n  - {name: a, kind: conv, forward_ms: 1, fwd: 2}\ncodecs:\n  - {name: none}\n");
  CHECK_THROWS_WITH(read_profile(f), Catch::Contains("layers[0].fwd: unknown key"));
  write("batch: 8\nlayers:\n  - {name: a, kind: dense, forward_ms: 1}\ncodecs:\n  - {name: none}\n");
  CHECK_THROWS_WITH(read_profile(f),
                    Catch::Contains(f + ":3: layers[0].kind: unknown value 'dense' (known: conv, maxpool"));
  write(
      "batch: 8\nlayers:\n  - {name: a, kind: conv, forward_ms: 1, params: 10, tensors: [4, 5]}\ncodecs:\n  - {name: "
      "none}\n");
  CHECK_THROWS_WITH(read_profile(f), Catch::Contains(f + ":3: layers[0].tensors: must add up to params (10)"));
  write("layers:\n  - {name: a, kind: conv, forward_ms: 1}\ncodecs:\n  - {name: none}\n");
  CHECK_THROWS_WITH(read_profile(f), Catch::Contains("batch: missing required key"));
  CHECK_THROWS_WITH(read_profile(dir.file("absent.yaml")), Catch::Contains("absent.yaml: profile file not found"));
  // What write_profile writes, read_profile reads back.
  Profile p;
  p.name = "rt", p.batch = 16, p.step_alone_ms = 3.5, p.straggler = 1.25, p.fuse_small = false;
  p.layers = {layer("c", "conv", 1.25, 2.5, 500, 10, 20)};
  p.layers[0].tensors = {480, 20};
  p.codecs = {codec("qsgd", 0.252)};
  write_profile(p, f);
  const Profile q = read_profile(f);
  CHECK(q.layers.size() == 1);
  CHECK(q.layers[0].backward_ms == 2.5);
  CHECK(q.layers[0].kind == "conv");
  CHECK(weight_kind(q.layers[0].traits) == WeightKind::Conv);  // the type's traits, from the registry
  CHECK(q.layers[0].params == 500);
  CHECK(q.layers[0].tensors == std::vector<int64_t>{480, 20});
  CHECK(q.codecs[0].ratio_act == Approx(0.252));
  CHECK(q.step_alone_ms == 3.5);
  CHECK(q.straggler == 1.25);
  CHECK(!q.fuse_small);
}
