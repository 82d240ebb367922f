// The codec registry and the codecs' keys: every registered codec has a case-table row, payload ids keep their order,
// each codec checks the keys it reads (make_codec names the key), and each row's reader reads exactly the keys its
// check judges.
#include <map>
#include <set>
#include <string>

#include "compress/codec.h"
#include "compress/powersgd.h"
#include "compress/qsgd.h"
#include "compress/topk.h"
#include "core/error.h"
#include "tests/codec_cases.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

TEST_CASE("every registered codec has a row in the codec case table, every row names a registered codec", "[codec]") {
  for (const auto& e : codec_registry()) {
    INFO(e.name << ": add its row to tests/codec_cases.cpp");
    CHECK(std::count_if(codec_cases().begin(), codec_cases().end(),
                        [&](const CodecCase& k) { return k.params.method == e.name; }) > 0);
    CHECK(std::string(make_codec({.method = e.name})->name()) == e.name);
  }
  std::set<std::string> names;
  for (const CodecCase& k : codec_cases()) {
    INFO(k.name);
    CHECK(std::string(make_codec(k.params)->name()) == k.params.method);
    CHECK(names.insert(k.name).second);  // no row twice
  }
}

TEST_CASE("registry keeps its order (payload ids) and rejects unknown names", "[codec]") {
  // A payload's codec id is its registry position + 1: rows are only ever appended.
  CHECK(codec_list(CodecList::All)
            .rfind("none,fp16,linear8,mantissa8,static_tree8,dynamic_tree8,qsgd,onebit,topk,adacomp", 0) == 0);
  CHECK(codec_id("none") == 1);
  CHECK(codec_id("adacomp") == 10);
  CodecParams p;
  p.method = "zip";
  CHECK_THROWS_WITH(make_codec(p), Catch::Contains("unknown compression method 'zip' (known: none, fp16, linear8"));
}

TEST_CASE("each codec checks the keys it reads, make_codec names the key", "[codec][keys]") {
  struct Bad {
    CodecParams p;
    const char* error;
  };
  const Bad bad[] = {
      {{.method = "qsgd", .bits = 3}, "compression.bits: must be 2, 4 or 8, got 3"},
      {{.method = "qsgd", .bucket = 0}, "compression.bucket: must be in [1, 2^31), got 0"},
      {{.method = "topk", .fraction = 1.5}, "compression.fraction: must be in (0, 1], got 1.5"},
      {{.method = "topk", .fraction = 0}, "compression.fraction: must be in (0, 1], got 0"},
      {{.method = "mantissa8", .mantissa_offset = 9}, "compression.mantissa_offset: must be in [0, 8], got 9"},
      {{.method = "linear8", .block = -1}, "compression.block: must be in [0, 2^31), got -1"},
      {{.method = "dynamic_tree8", .block = int64_t{1} << 31}, "compression.block: must be in [0, 2^31)"},
      {{.method = "onebit", .block = -5}, "compression.block: must be in [0, 2^31), got -5"},
      {{.method = "adacomp", .bin = -1}, "compression.bin: must be >= 0"},
  };
  for (const Bad& b : bad) {
    INFO(b.p.method << ": " << b.error);
    CHECK_THROWS_WITH(make_codec(b.p), Catch::Contains(b.error));
    const auto e = check_codec_keys(b.p);
    REQUIRE(e);
    CHECK_THAT("compression." + e->key + ": " + e->message, Catch::Contains(b.error));
    // Every codec's check, whatever the method (as the config reads the keys): the same key.
    CodecParams none = b.p;
    none.method = "none";
    CHECK_FALSE(check_codec_keys(none));
    REQUIRE(check_codec_keys(none, true));
    CHECK(check_codec_keys(none, true)->key == e->key);
  }
  // A codec class refuses bad parameters of its own (the same checks).
  CHECK_THROWS_WITH(QsgdCodec(QsgdParams{.bits = 5}), Catch::Contains("compression.bits: must be 2, 4 or 8, got 5"));
  CHECK_THROWS_WITH(TopkCodec(TopkParams{.fraction = -1}), Catch::Contains("compression.fraction"));
  // Keys a codec does not read are not its to check.
  CHECK_NOTHROW(make_codec({.method = "fp16", .bits = 3, .fraction = 7}));
  CHECK_FALSE(check_codec_keys({}, true));
  for (const CodecCase& k : codec_cases()) CHECK_FALSE(check_codec_keys(k.params, true));
}

namespace {

// A key source over a map, recording what was asked.
class MapKeys final : public KeySource {
 public:
  explicit MapKeys(std::map<std::string, double> v = {}) : v_(std::move(v)) {}
  int64_t integer(const char* key, int64_t dflt) override { return static_cast<int64_t>(get(key, dflt)); }
  double number(const char* key, double dflt) override { return get(key, dflt); }
  [[noreturn]] void fail(const char* key, const std::string& message) override { OCTET_THROW(key << ": " << message); }
  std::set<std::string> asked;

 private:
  double get(const char* key, double dflt) {
    asked.insert(key);
    const auto it = v_.find(key);
    return it == v_.end() ? dflt : it->second;
  }
  std::map<std::string, double> v_;
};

}  // namespace

TEST_CASE("each codec row reads its own keys, and its check judges every key it reads", "[codec][keys]") {
  for (const CodecEntry& e : codec_registry()) {
    INFO(e.name);
    MapKeys probe;
    CodecParams p;
    e.read(probe, p);
    CHECK_FALSE(e.check(p));  // the defaults pass
    for (const std::string& key : probe.asked) {
      INFO(key);
      MapKeys bad({{key, -5}});  // no key a codec reads takes -5
      CodecParams q;
      e.read(bad, q);
      const auto err = e.check(q);
      REQUIRE(err);
      CHECK(err->key == key);
    }
  }
  // A value read goes where the codec takes it from: qsgd built with bits 4 from a reader writes 4-bit payloads.
  MapKeys four({{"bits", 4}, {"bucket", 64}});
  CodecParams q{.method = "qsgd"};
  read_method_keys(four, q);
  CHECK(q.bits == 4);
  CHECK(q.bucket == 64);
  CHECK(make_codec(q)->max_bytes(6400) == kHeaderBytes + 100 * 4 + 6400 / 2);
  // Model parallelism's activations: only the codecs fit for them read (topk's fraction, powersgd's rank are not
  // theirs).
  MapKeys acts;
  CodecParams a;
  read_method_keys(acts, a, true);
  CHECK(acts.asked.count("block"));
  CHECK_FALSE(acts.asked.count("fraction"));
  CHECK_FALSE(acts.asked.count("rank"));
  // An integer past an int's range fails naming the key (it would wrap to a valid one).
  MapKeys wide({{"bits", 4294967304.0}});
  CHECK_THROWS_WITH(read_method_keys(wide, q), Catch::Contains("bits: must fit a 32-bit integer, got 4294967304"));
}
