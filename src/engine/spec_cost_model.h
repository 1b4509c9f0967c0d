// What a step of the continuous batch costs, as the speculation controller needs it: the plain
// step's time and what k more rows would add, with how sure the measurements make that.
//
// Each measured step is a point (n tokens, P attended positions, seconds). A fit is a weighted
// least-squares line, seconds = base + b (n - n0) + c (P - P0) / L (L = P0 / n0, the query's
// positions per row, so b and c both read as seconds per row), around the query step (n0, P0):
//  - weights favour recent steps (machine load and contexts drift) and token counts near n0
//    (a memory-bound pass is flat in n up to a knee, then linear; only the local slope
//    matters);
//  - robust reweighting (Tukey's biweight) drops the steps a stall made slow: on a busy machine
//    they are frequent and can take a hundred times a step;
//  - the attention term c lets a draft row at a long context cost more than one at a short
//    one, and keeps contexts that grow over time from passing for a token-count effect;
//  - weak priors (b at kPriorSlope of the step's time per row, c at 0) keep the line defined
//    while every recent step had the same token count; the error they leave is part of the
//    standard error, so a slope nobody measured is not trusted as flat.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace lift {

class StepCostModel {
 public:
  static constexpr size_t kWindow = 256;       // steps kept
  static constexpr double kHalfLife = 64;      // steps after which a step counts half
  static constexpr double kPriorSlope = 0.08;  // prior extra seconds per row, of the step's
  static constexpr double kPriorWeight = 2;    // the priors' weight, in steps one row apart

  struct Fit {
    bool known = false;            // enough recent steps to fit
    double base = 0;               // predicted seconds of the query step
    double per_row = 0;            // L: positions per row at the query
    bool positions = false;        // the attention term is in the fit
    std::array<double, 3> beta{};  // base, b, c
    std::array<std::array<double, 3>, 3> cov{};
    // Seconds that dn more rows attending dp more positions add, and its standard error.
    double extra(double dn, double dp, double* se) const;
  };

  // positions <= 0: not reported; the fit then leaves the attention term out while such a
  // step is in the window.
  void observe(double n_tokens, double positions, double seconds);
  // The fit around a step of n0 tokens attending p0 positions.
  Fit fit(double n0, double p0) const;
  bool empty() const { return size_ == 0; }
  double last_positions_per_token() const;

 private:
  struct Sample {
    double n = 0, p = 0, seconds = 0;
    uint64_t step = 0;
  };
  // One weighted least-squares solve over w_ (the design is 1, n - n0, (p - p0) / L).
  bool solve(double n0, double p0, double per_row, size_t dims, Fit& out) const;

  std::array<Sample, kWindow> ring_{};
  size_t size_ = 0;
  uint64_t count_ = 0;  // steps observed; the newest is ring_[(count_ - 1) % kWindow]
  mutable std::vector<double> w0_, w_, resid_, scratch_;  // fit()'s
};

}  // namespace lift
