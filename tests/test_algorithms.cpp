// The reduction algorithm table (comm/algorithm_table.inc): its rows in the enum's order, names parsed back, which
// codecs each carries by their traits, and the one refusal every reader gives (the config's: test_config.cpp).
#include <catch2/catch.hpp>

#include <set>

#include "comm/collectives.h"
#include "compress/codec.h"
#include "test_util.h"

using namespace octet;
using namespace octet::test;

TEST_CASE("the algorithm table: rows in the enum's order, names parsed back, unknown names listing the table",
          "[comm][algorithm]") {
  std::set<std::string> names;
  for (size_t i = 0; i < algorithm_table().size(); ++i) {
    const AlgorithmDef& a = algorithm_table()[i];
    INFO(a.name);
    CHECK(static_cast<size_t>(a.id) == i);
    CHECK(names.insert(a.name).second);
    CHECK(parse_algorithm(a.name) == a.id);
    CHECK(std::string(algorithm_name(a.id)) == a.name);
    CHECK(a.run != nullptr);
    CHECK(a.messages(1) == 0);  // one rank sends nothing
    CHECK(a.sent(1, 1000) == 0);
  }
  CHECK(algorithm_names() == std::vector<std::string>{"allreduce", "scatter_allgather", "allgather"});
  CHECK_THROWS_WITH(
      parse_algorithm("ring"),
      Catch::Contains("unknown reduction algorithm 'ring' (known: allreduce, scatter_allgather, allgather)"));
}

TEST_CASE("which codecs each algorithm carries: allreduce fp32 alone, scatter_allgather the dense ones, allgather all",
          "[comm][algorithm]") {
  for (const auto& e : codec_registry()) {
    INFO(e.name);
    CHECK(algorithm_def(Algorithm::Allreduce).fits(e.traits) == e.traits.identity);
    CHECK(algorithm_def(Algorithm::ScatterAllgather).fits(e.traits) == !e.traits.sparse);
    CHECK(algorithm_def(Algorithm::Allgather).fits(e.traits));
    // The codec's default algorithm carries it.
    CHECK(algorithm_misfit(default_algorithm(*make_codec({.method = e.name})), e.name, e.traits).empty());
  }
  CHECK(algorithm_misfit(Algorithm::Allreduce, "dynamic_tree8", codec_traits("dynamic_tree8")) ==
        "algorithm allreduce carries fp32 only (the transport sums the values); method dynamic_tree8 needs "
        "scatter_allgather or allgather");
  CHECK_THAT(algorithm_misfit(Algorithm::ScatterAllgather, "topk", codec_traits("topk")),
             Catch::StartsWith("algorithm scatter_allgather carries dense codecs") &&
                 Catch::EndsWith("method topk needs allgather"));
}
