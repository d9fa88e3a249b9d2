// Log-scale histograms of the first-steps trace against counting by hand.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "analysis/trace.h"

namespace normlab::analysis {
namespace {

TEST(LogHistogram, BinsCountedByHand) {
  train::TraceConfig c;  // [1e-16, 1e4), 10 bins per decade: bin k covers log10|v| in [-16 + k/10, ...)
  const double inf = std::numeric_limits<double>::infinity();
  auto v = torch::tensor({0.0, -0.0, 3e-5, -3.5e-5, 0.5, 2.5e3, 1e-20, 2e4, inf, std::nan(""), 7e-2},
                         torch::kFloat64);
  const auto h = log_histogram(v, c);
  EXPECT_EQ(h.zeros, 2);
  EXPECT_EQ(h.underflow, 1);  // 1e-20
  EXPECT_EQ(h.overflow, 3);   // 2e4, inf, nan
  ASSERT_EQ(h.counts.size(), 200u);
  // log10(3e-5) = -4.52, log10(3.5e-5) = -4.46: bins 114 and 115; log10(0.5) = -0.30: bin 156;
  // log10(2500) = 3.398: bin 193; log10(0.07) = -1.15: bin 148.
  std::vector<int64_t> expected(200, 0);
  expected[114] = expected[115] = expected[156] = expected[193] = expected[148] = 1;
  EXPECT_EQ(h.counts, expected);
}

TEST(LogHistogram, CountsSumToTheElementCount) {
  torch::manual_seed(1);
  auto v = torch::randn({37, 53}) * torch::pow(10.0, torch::randint(-20, 6, {37, 53}).to(torch::kFloat32));
  v.index_put_({torch::rand({37, 53}) < 0.1}, 0.0);
  train::TraceConfig c;
  const auto h = log_histogram(v, c);
  int64_t total = h.zeros + h.underflow + h.overflow;
  for (auto n : h.counts) total += n;
  EXPECT_EQ(total, v.numel());
  // The CSV rows hold the same counts.
  const auto rows = histogram_rows(h, c, "1,p,grad");
  int64_t from_rows = 0;
  std::stringstream s(rows);
  for (std::string line; std::getline(s, line);) from_rows += std::stoll(line.substr(line.rfind(',') + 1));
  EXPECT_EQ(from_rows, v.numel());
  EXPECT_EQ(rows.rfind("1,p,grad,-inf,-inf,", 0), 0u);  // the zero bin first
}

}  // namespace
}  // namespace normlab::analysis
