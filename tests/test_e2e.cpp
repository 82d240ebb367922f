// End to end: Caffe's LeNet on the real MNIST subset (datasets/mnist-22k, carried in the repository) reaches >= 97%
// test accuracy in one epoch.
#include "core/fileio.h"
#include "trainer/config.h"
#include "trainer/trainer.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

TEST_CASE("LeNet on real MNIST reaches 97% after one epoch", "[e2e]") {
  const std::string data = source_dir() + "/datasets/mnist-22k";
  INFO("real MNIST expected at " << data << " (carried in the repository)");
  REQUIRE(is_dir(data));
  TempDir d;
  Config cfg = load_config(source_dir() + "/configs/mnist/lenet.yaml",
                           {"data.path=" + data, "run.epochs=1", "run.out_dir=" + d.path(), "run.log_every=100"});
  TrainResult r = train(cfg, {});
  INFO("test accuracy " << r.test.accuracy << " at " << r.images_per_s << " img/s");
  CHECK(r.test.count == 10000);
  CHECK(r.test.accuracy >= 0.97);
  CHECK(path_exists(d.file("mnist-lenet/checkpoint.bin")));
  CHECK(path_exists(d.file("mnist-lenet/summary.json")));
  CHECK_THAT(read_file(d.file("mnist-lenet/metrics.jsonl")), Catch::Contains("\"event\":\"eval\""));
  // The steady throughput leaves out the first run.warmup_steps (5) steps, and only them.
  CHECK(r.steady_images == r.train_images - 5 * cfg.data.batch_size);
  CHECK(r.steady_seconds > 0);
  CHECK(r.steady_seconds < r.train_seconds);
  CHECK_THAT(read_file(d.file("mnist-lenet/summary.json")), Catch::Contains("\"images_per_s_steady\":"));
}
