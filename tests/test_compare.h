// The comparisons every numerical test makes, written so that they can fail: on a NaN or an
// infinity on either side, on an output the code under test never wrote, on a size mismatch,
// and on an empty comparison.
//
// Unwritten outputs: a test fills an output buffer with unwritten() before the call. That is
// a signalling NaN with a recognisable payload, a value no kernel writes (IEEE arithmetic
// quiets every NaN it produces or passes on), and every check here rejects NaN, so a
// surviving sentinel fails even where both sides of a bitwise comparison kept it. Byte outputs
// have no such spare value: written_bytes() runs the writer twice over two different fills
// instead, so an unwritten byte differs between the runs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace lift::test {

inline constexpr uint32_t kUnwrittenBits = 0x7FA5A5A5u;  // quiet bit (22) clear: signalling

inline float unwritten() { return std::bit_cast<float>(kUnwrittenBits); }
inline bool is_unwritten(float x) { return std::bit_cast<uint32_t>(x) == kUnwrittenBits; }
// n floats holding the sentinel: an output buffer of exactly the size the call writes.
inline std::vector<float> unwritten_floats(size_t n) { return std::vector<float>(n, unwritten()); }

// What a value that fails every comparison is, for messages.
inline std::string describe_bad(float x) {
  if (is_unwritten(x)) return "never written (still the sentinel)";
  if (std::isnan(x)) return "NaN";
  return x > 0 ? "+inf" : "-inf";
}

// The exactness contract's tolerance over n_rows rows of n_cols: for each row,
// max|got - ref| <= 1e-4 * max(1, max|ref|), and every value on both sides finite (NaN, inf
// and the unwritten sentinel fail). Names the first failing row and element.
inline ::testing::AssertionResult within_tolerance(const float* got, const float* ref,
                                                   size_t n_rows, size_t n_cols) {
  if (n_rows == 0 || n_cols == 0) return ::testing::AssertionFailure() << "nothing compared";
  for (size_t r = 0; r < n_rows; ++r) {
    double max_ref = 0.0, max_err = 0.0;
    size_t worst = 0;
    for (size_t c = 0; c < n_cols; ++c) {
      const size_t i = r * n_cols + c;
      if (!std::isfinite(got[i])) {
        return ::testing::AssertionFailure()
               << "row " << r << " element " << c << ": got " << describe_bad(got[i]);
      }
      if (!std::isfinite(ref[i])) {
        return ::testing::AssertionFailure()
               << "row " << r << " element " << c << ": reference " << describe_bad(ref[i]);
      }
      const double x = got[i], y = ref[i];
      max_ref = std::max(max_ref, std::fabs(y));
      if (std::fabs(x - y) > max_err) {
        max_err = std::fabs(x - y);
        worst = c;
      }
    }
    const double tol = 1e-4 * std::max(1.0, max_ref);
    if (!(max_err <= tol)) {
      const size_t i = r * n_cols + worst;
      return ::testing::AssertionFailure()
             << "row " << r << ": max |got - ref| = " << max_err << " > " << tol << " (element "
             << worst << ": got " << got[i] << ", reference " << ref[i] << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// got holds exactly n_rows x n_cols values; ref at least that many (a reference computed for
// more rows than this call), of which the first n_rows rows are compared.
inline ::testing::AssertionResult within_tolerance(const std::vector<float>& got,
                                                   const std::vector<float>& ref, size_t n_rows,
                                                   size_t n_cols) {
  if (got.size() != n_rows * n_cols || ref.size() < n_rows * n_cols) {
    return ::testing::AssertionFailure()
           << "sizes: got " << got.size() << ", reference " << ref.size() << ", compared " << n_rows
           << " x " << n_cols;
  }
  return within_tolerance(got.data(), ref.data(), n_rows, n_cols);
}

// One row: the whole of both vectors, which must be the same non-zero size.
inline ::testing::AssertionResult within_tolerance(const std::vector<float>& got,
                                                   const std::vector<float>& ref) {
  if (got.size() != ref.size()) {
    return ::testing::AssertionFailure()
           << "sizes differ: got " << got.size() << ", reference " << ref.size();
  }
  return within_tolerance(got.data(), ref.data(), 1, got.size());
}

// Bitwise equality of n floats, all of which must have been written: fails where the bits
// differ and on any NaN, even one both sides hold with the same bits (infinities are values
// like any other here: softmax_exp overflows to +inf by contract).
inline ::testing::AssertionResult same_bits(const float* a, const float* b, size_t n) {
  if (n == 0) return ::testing::AssertionFailure() << "nothing compared";
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(a[i])) {
      return ::testing::AssertionFailure() << "element " << i << ": " << describe_bad(a[i]);
    }
    if (std::isnan(b[i])) {
      return ::testing::AssertionFailure() << "element " << i << ": " << describe_bad(b[i]);
    }
  }
  if (std::memcmp(a, b, n * sizeof(float)) != 0) {
    for (size_t i = 0; i < n; ++i) {
      if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) {
        // One stream for the hex bits: AssertionResult formats each << on its own.
        std::ostringstream bits;
        bits << std::hex << "0x" << std::bit_cast<uint32_t>(a[i]) << " vs 0x"
             << std::bit_cast<uint32_t>(b[i]);
        return ::testing::AssertionFailure() << "element " << i << " differs: " << a[i] << " vs "
                                             << b[i] << " (bits " << bits.str() << ")";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult same_bits(const std::vector<float>& a,
                                            const std::vector<float>& b) {
  if (a.size() != b.size()) {
    return ::testing::AssertionFailure() << "sizes differ: " << a.size() << " vs " << b.size();
  }
  return same_bits(a.data(), b.data(), a.size());
}

// The n bytes write(dst) produces. It runs twice, over a buffer of exactly n bytes filled with
// 0x00 and then with 0xFF; a byte that differs between the runs was not written (or not
// deterministically) and fails the test. Returns the first run's bytes.
template <class Write>
std::vector<uint8_t> written_bytes(size_t n, Write&& write) {
  std::vector<uint8_t> a(n, 0x00), b(n, 0xFF);
  write(a.data());
  write(b.data());
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) {
      ADD_FAILURE() << "byte " << i << " of " << n << " was not written";
      break;
    }
  }
  return a;
}

}  // namespace lift::test
