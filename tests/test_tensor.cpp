// Tensor, Buffer and Exec on the host: ownership and views, copies and zeroing ordered on streams, device-tagged
// buffers, host events, and the CUDA context's error where no GPU can be used.
#include "core/device.h"
#include "core/exec.h"
#include "core/tensor.h"
#include "core/tensor_ops.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

TEST_CASE("tensors own zeroed, aligned storage, copies are deep, views write through", "[tensor]") {
  Tensor t({2, 3, 4});
  CHECK(t.numel() == 24);
  CHECK(t.bytes() == 96);
  CHECK(reinterpret_cast<uintptr_t>(t.data()) % 64 == 0);
  CHECK(to_vector(t) == std::vector<float>(24, 0.f));
  for (int64_t i = 0; i < 24; ++i) t.data()[i] = static_cast<float>(i);
  Tensor c = t;  // deep
  c.data()[0] = 100.f;
  CHECK(t.data()[0] == 0.f);
  Tensor v = t.view(12, {3, 4});  // the second [3,4] plane
  CHECK(v.is_view());
  CHECK(v.data() == t.data() + 12);
  v.data()[1] = -1.f;
  CHECK(t.data()[13] == -1.f);
  v = make_tensor({3, 4}, std::vector<float>(12, 2.f));  // assignment into a view writes the viewed elements
  CHECK(t.data()[23] == 2.f);
  CHECK(t.data()[11] == 11.f);
  Tensor owned = v;  // a copy of a view owns its data
  CHECK_FALSE(owned.is_view());
  CHECK_THROWS_WITH(t.view(20, {2, 4}), Catch::Contains("outside [2,3,4]"));
  CHECK_THROWS_WITH(v.resize({5, 4}), Catch::Contains("cannot grow"));
  v.resize({2, 4});  // shrinking a view is fine
  CHECK(v.numel() == 8);
  float raw[6] = {1, 2, 3, 4, 5, 6};
  Tensor w = Tensor::wrap(raw, {2, 3});
  w.zero(Stream{});
  CHECK(raw[5] == 0.f);
  Tensor dst({2, 3});
  dst.copy_from(make_tensor({6}, {1, 2, 3, 4, 5, 6}), Stream{});
  CHECK(to_vector(dst) == std::vector<float>({1, 2, 3, 4, 5, 6}));
  CHECK_THROWS_WITH(dst.copy_from(Tensor({5})), Catch::Contains("copy of fp32 [5] into fp32 [2,3]"));
  t.resize({2, 2});  // within capacity: same storage
  CHECK(t.numel() == 4);
  t.reshape({4});
  CHECK(t.shape() == Shape{4});
  CHECK_THROWS_WITH(t.reshape({5}), Catch::Contains("changes numel"));
}

TEST_CASE("buffers hold bytes and integers on a device, resize keeps contents on the host", "[tensor]") {
  Buffer<int32_t> b(3);
  for (int i = 0; i < 3; ++i) b[i] = i + 1;
  b.resize(1000);
  CHECK(b.size() == 1000);
  CHECK((b[0] == 1 && b[1] == 2 && b[2] == 3));
  b.assign(4, 7);
  CHECK((b.size() == 4 && b[3] == 7));
  Buffer<uint8_t> moved(16);
  uint8_t* p = moved.data();
  Buffer<uint8_t> other = std::move(moved);
  CHECK(other.data() == p);
  CHECK(moved.size() == 0);
  CHECK(other.device() == Device::CPU);
}

TEST_CASE("the host context: empty streams, events already reached, no GPU gives one clear error", "[tensor][exec]") {
  Exec& h = Exec::host();
  CHECK(h.device() == Device::CPU);
  CHECK(h.compute().handle == nullptr);
  const Event e = h.record(h.compute());
  CHECK_FALSE(e.on_device());
  h.wait(h.comm(), e);
  h.sync(e);
  h.sync(h.copy());
  if (cuda_device_count() == 0) {
    CHECK_THROWS_WITH(Exec::cuda(0), Catch::StartsWith("no CUDA device can be used: "));
    CHECK_THROWS_WITH(Tensor({4}, Device::CUDA), Catch::Contains("CUDA") || Catch::Contains("cuda"));
  }
}

TEST_CASE("copy_rows moves a strided block between tensors and refuses rows outside either", "[tensor]") {
  Tensor src = random_tensor({4, 6}, 3);  // [4, 6]
  Tensor dst({3, 5});                     // [3, 5]
  // rows 1..3, columns 2..4 of src -> rows 0..2, columns 1..3 of dst
  copy_rows(dst, 1, 5, src, 1 * 6 + 2, 6, 3, 3, Exec::host().copy());
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 5; ++c) {
      const float want = (c >= 1 && c <= 3) ? src.data()[(r + 1) * 6 + (c - 1 + 2)] : 0.f;
      CHECK(dst.data()[r * 5 + c] == want);
    }
  CHECK_THROWS_WITH(copy_rows(dst, 3, 5, src, 0, 6, 3, 3, Exec::host().copy()),
                    Catch::Contains("copy_rows: 3 rows of 3"));
  CHECK_THROWS_WITH(copy_rows(dst, 0, 2, src, 0, 6, 2, 3, Exec::host().copy()), Catch::Contains("outside [3,5]"));
  copy_rows(dst, 0, 5, src, 0, 6, 0, 3, Exec::host().copy());  // nothing to copy is no error
}

TEST_CASE("add_into and scale_into on the host: the reference loops, views written through, sizes checked",
          "[tensor]") {
  Exec& h = Exec::host();
  Tensor acc = random_tensor({7, 3}, 4);
  const Tensor x = random_tensor({21}, 5);
  const std::vector<float> before = to_vector(acc);
  add_into(acc, x, h);
  for (int i = 0; i < 21; ++i) CHECK(acc.data()[i] == before[i] + x.data()[i]);
  Tensor out({2, 21});
  Tensor row = out.view(21, {21});
  scale_into(row, acc, 0.25f, h);
  for (int i = 0; i < 21; ++i) {
    CHECK(out.data()[i] == 0.f);
    CHECK(out.data()[21 + i] == acc.data()[i] * 0.25f);
  }
  CHECK_THROWS_WITH(add_into(acc, Tensor({20}), h), Catch::Contains("add_into: [7,3] and [20]"));
}
