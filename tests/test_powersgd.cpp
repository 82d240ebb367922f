// PowerSGD's pieces on one process: DDP's rule for which tensors it compresses, its keys' checks, the row-major
// products against a loop in double for every transposition, and Gram-Schmidt (orthonormal columns, a zero column
// kept finite).
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "compress/powersgd.h"
#include "core/rng.h"

using namespace octet;

TEST_CASE("powersgd compresses what DDP's rule compresses, at rank min(rank, rows, cols)", "[powersgd]") {
  const PowerSgdParams r1{.rank = 1}, r4{.rank = 4};
  CHECK(low_rank_shape({20, 1, 5, 5}, r1).r == 1);  // conv: out x in*k*k
  CHECK(low_rank_shape({20, 1, 5, 5}, r1).cols == 25);
  CHECK(low_rank_shape({500, 800}, r4).rows == 500);
  CHECK(low_rank_shape({500}, r1).r == 0);              // one dimension: fp32
  CHECK(low_rank_shape({10, 10}, r4).r == 0);           // (10 + 10) * 4 * 2 >= 100: would not shrink 2x
  CHECK(low_rank_shape({10, 10}, {.rank = 2}).r == 2);  // (10 + 10) * 2 * 2 < 100
  CHECK(low_rank_shape({3, 1000}, r4).r == 0);          // capped at 3 rows: (3 + 1000) * 3 >= 3000, never smaller
  CHECK(low_rank_shape({10, 10}, {.rank = 2, .min_compression_rate = 3}).r == 0);
  for (const auto& [key, p] :
       std::vector<std::pair<std::string, CodecParams>>{{"rank", {.rank = 0}},
                                                        {"start_step", {.start_step = -1}},
                                                        {"min_compression_rate", {.min_compression_rate = 0.5}}}) {
    const auto bad = check_powersgd(p);
    REQUIRE(bad);
    CHECK(bad->key == key);
  }
  CHECK_FALSE(check_powersgd(CodecParams{}));
  CHECK(compression_methods().back() == "powersgd");
  CHECK(is_low_rank("powersgd"));
  CHECK_FALSE(is_low_rank("none"));
}

TEST_CASE("powersgd's products: oneDNN's sgemm against a loop in double, every transposition", "[powersgd]") {
  Rng r(3);
  for (const bool ta : {false, true})
    for (const bool tb : {false, true})
      for (const auto& [m, n, k] : {std::array<int64_t, 3>{7, 3, 29}, {64, 1, 500}, {1, 5, 2}, {33, 4, 130}}) {
        INFO("m " << m << " n " << n << " k " << k << " trans_a " << ta << " trans_b " << tb);
        std::vector<float> a(m * k), b(k * n), c(m * n, 123.f);
        for (auto& x : a) x = r.normal();
        for (auto& x : b) x = r.normal();
        lowrank_gemm_cpu(a.data(), b.data(), c.data(), m, n, k, ta, tb, Stream{});
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double s = 0, mag = 0;
            for (int64_t l = 0; l < k; ++l) {
              const double av = ta ? a[l * m + i] : a[i * k + l], bv = tb ? b[j * k + l] : b[l * n + j];
              s += av * bv;
              mag += std::abs(av * bv);
            }
            REQUIRE(std::abs(c[i * n + j] - s) <= 1e-5 * mag + 1e-6);
          }
      }
}

TEST_CASE("powersgd's Gram-Schmidt: orthonormal columns spanning the same space, a zero column stays zero",
          "[powersgd]") {
  Rng rng(4);
  for (const auto& [rows, r] : {std::pair<int64_t, int>{50, 1}, {50, 4}, {7, 7}, {1000, 3}}) {
    INFO(rows << " x " << r);
    std::vector<float> p(rows * r);
    for (auto& x : p) x = rng.normal() * 1e-3f;
    const std::vector<float> before = p;
    orthogonalize_cpu(p.data(), rows, r, 1e-8f, Stream{});
    for (int i = 0; i < r; ++i)
      for (int l = 0; l < r; ++l) {
        double d = 0;
        for (int64_t j = 0; j < rows; ++j) d += static_cast<double>(p[j * r + i]) * p[j * r + l];
        CHECK(std::abs(d - (i == l ? 1.0 : 0.0)) < 1e-4);  // float Gram-Schmidt on a random square: ~eps * cond
      }
    // Column i of the input lies in the span of the first i + 1 output columns: its residual after projection is ~0.
    for (int i = 0; i < r; ++i) {
      std::vector<double> v(rows);
      double norm = 0;
      for (int64_t j = 0; j < rows; ++j) norm += std::pow(v[j] = before[j * r + i], 2);
      for (int l = 0; l <= i; ++l) {
        double d = 0;
        for (int64_t j = 0; j < rows; ++j) d += v[j] * p[j * r + l];
        for (int64_t j = 0; j < rows; ++j) v[j] -= d * p[j * r + l];
      }
      double res = 0;
      for (int64_t j = 0; j < rows; ++j) res += v[j] * v[j];
      CHECK(std::sqrt(res / norm) < 1e-4);
    }
  }
  std::vector<float> z(20, 0.f);
  orthogonalize_cpu(z.data(), 10, 2, 1e-8f, Stream{});
  CHECK(z == std::vector<float>(20, 0.f));
}
