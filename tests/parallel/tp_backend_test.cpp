// How tensor parallelism splits a product's output rows: every row exactly once, in rank
// order, in whole 16-row panels (a panel is the unit the repacked kernels compute), as evenly
// as panels allow. That the split leaves results bitwise unchanged is tests/parallel/tp_test.py.
#include "parallel/tp_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

namespace lift {
namespace {

TEST(TpBackend, ShareCoversEveryRowOnceInWholePanels) {
  for (size_t n_out : {1u, 15u, 16u, 17u, 64u, 100u, 2048u, 5632u, 32000u, 151936u}) {
    for (int size : {1, 2, 3, 4, 8}) {
      size_t next = 0, least = SIZE_MAX, most = 0;
      for (int rank = 0; rank < size; ++rank) {
        const auto [b, e] = TpBackend::share(n_out, rank, size);
        EXPECT_EQ(b, next) << n_out << " rows, rank " << rank << " of " << size;
        EXPECT_LE(b, e);
        EXPECT_EQ(b % kernels::kPanelRows, 0u);
        if (e != n_out) {
          EXPECT_EQ(e % kernels::kPanelRows, 0u);
        }
        next = e;
        least = std::min(least, e - b);
        most = std::max(most, e - b);
      }
      EXPECT_EQ(next, n_out) << n_out << " rows over " << size;
      if (n_out % kernels::kPanelRows == 0) {
        EXPECT_LE(most - least, kernels::kPanelRows) << n_out << " rows over " << size;
      }
    }
  }
}

}  // namespace
}  // namespace lift
