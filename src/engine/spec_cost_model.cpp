#include "engine/spec_cost_model.h"

#include <algorithm>
#include <cmath>

namespace lift {

namespace {

constexpr double kMinWidth = 4;      // token-count kernel width at small n0, in tokens
constexpr double kTukey = 4.685;     // residuals past this many robust scales get no weight
constexpr int kRounds = 3;           // reweighting rounds
constexpr double kRelevant = 0.01;   // least weight of a step the residual scale looks at
constexpr double kMinEffective = 4;  // fewer effective steps: no fit

using Mat = std::array<std::array<double, 3>, 3>;

// Inverts the leading d x d block of a (symmetric positive definite by construction: the
// priors add to the diagonal); false when it is singular all the same.
bool invert(Mat a, size_t d, Mat& inv) {
  inv = {};
  for (size_t i = 0; i < d; ++i) inv[i][i] = 1;
  for (size_t c = 0; c < d; ++c) {
    size_t piv = c;
    for (size_t r = c + 1; r < d; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[piv][c])) piv = r;
    }
    if (!(std::abs(a[piv][c]) > 1e-300)) return false;
    std::swap(a[c], a[piv]);
    std::swap(inv[c], inv[piv]);
    const double f = 1 / a[c][c];
    for (size_t k = 0; k < d; ++k) {
      a[c][k] *= f;
      inv[c][k] *= f;
    }
    for (size_t r = 0; r < d; ++r) {
      if (r == c || a[r][c] == 0) continue;
      const double g = a[r][c];
      for (size_t k = 0; k < d; ++k) {
        a[r][k] -= g * a[c][k];
        inv[r][k] -= g * inv[c][k];
      }
    }
  }
  return true;
}

}  // namespace

double StepCostModel::Fit::extra(double dn, double dp, double* se) const {
  const std::array<double, 3> x{0, dn, positions && per_row > 0 ? dp / per_row : 0};
  double mean = 0, var = 0;
  for (size_t i = 0; i < 3; ++i) {
    mean += x[i] * beta[i];
    for (size_t j = 0; j < 3; ++j) var += x[i] * cov[i][j] * x[j];
  }
  if (se != nullptr) *se = std::sqrt(std::max(var, 0.0));
  return mean;
}

void StepCostModel::observe(double n_tokens, double positions, double seconds) {
  if (!(n_tokens > 0) || !(seconds > 0) || !std::isfinite(seconds)) return;
  Sample& s = ring_[count_ % kWindow];
  s = {n_tokens, std::isfinite(positions) ? std::max(positions, 0.0) : 0.0, seconds, count_};
  ++count_;
  size_ = std::min(size_ + 1, kWindow);
}

double StepCostModel::last_positions_per_token() const {
  if (size_ == 0) return 0;
  const Sample& s = ring_[(count_ - 1) % kWindow];
  return s.p / s.n;
}

bool StepCostModel::solve(double n0, double p0, double per_row, size_t dims, Fit& out) const {
  Mat a{};
  Mat b{};
  std::array<double, 3> rhs{};
  double sw = 0, sy = 0;
  for (size_t i = 0; i < size_; ++i) {
    sw += w_[i];
    sy += w_[i] * ring_[i].seconds;
  }
  if (!(sw > 0)) return false;
  const double mean_y = sy / sw;
  std::array<double, 3> x{};
  for (size_t i = 0; i < size_; ++i) {
    const Sample& s = ring_[i];
    x = {1, s.n - n0, dims > 2 ? (s.p - p0) / per_row : 0};
    for (size_t r = 0; r < dims; ++r) {
      rhs[r] += w_[i] * x[r] * s.seconds;
      for (size_t c = 0; c < dims; ++c) {
        a[r][c] += w_[i] * x[r] * x[c];
        b[r][c] += w_[i] * w_[i] * x[r] * x[c];
      }
    }
  }
  // The priors, as kPriorWeight steps one row away from the query.
  const std::array<double, 3> prior{0, kPriorSlope * mean_y, 0};
  for (size_t r = 1; r < dims; ++r) {
    a[r][r] += kPriorWeight;
    b[r][r] += kPriorWeight;
    rhs[r] += kPriorWeight * prior[r];
  }
  Mat inv{};
  if (!invert(a, dims, inv)) return false;
  out.beta = {};
  for (size_t r = 0; r < dims; ++r) {
    for (size_t c = 0; c < dims; ++c) out.beta[r] += inv[r][c] * rhs[c];
  }
  // Residual variance of one full-weight step, with the fit's degrees of freedom taken out.
  double sw2 = 0, ssr = 0;
  for (size_t i = 0; i < size_; ++i) {
    const Sample& s = ring_[i];
    x = {1, s.n - n0, dims > 2 ? (s.p - p0) / per_row : 0};
    double pred = 0;
    for (size_t r = 0; r < dims; ++r) pred += x[r] * out.beta[r];
    const double r = s.seconds - pred;
    ssr += w_[i] * r * r;
    sw2 += w_[i] * w_[i];
  }
  const double n_eff = sw * sw / sw2;
  if (n_eff < kMinEffective) return false;
  const double var = ssr / sw * n_eff / std::max(n_eff - static_cast<double>(dims), 1.0);
  // The weights say how much a step is like the query, not how precise it is: the error of
  // the weighted estimate is the sandwich inv B inv (B also holds the priors' pseudo-steps).
  out.cov = {};
  for (size_t r = 0; r < dims; ++r) {
    for (size_t c = 0; c < dims; ++c) {
      double v = 0;
      for (size_t i = 0; i < dims; ++i) {
        for (size_t j = 0; j < dims; ++j) v += inv[r][i] * b[i][j] * inv[j][c];
      }
      out.cov[r][c] = var * v;
    }
  }
  out.base = out.beta[0];
  return true;
}

StepCostModel::Fit StepCostModel::fit(double n0, double p0) const {
  Fit out;
  if (size_ == 0 || !(n0 > 0)) return out;
  bool positions = p0 > 0;
  for (size_t i = 0; i < size_ && positions; ++i) positions = ring_[i].p > 0;
  const double per_row = positions ? p0 / n0 : 0;
  const size_t dims = positions ? 3 : 2;
  const double width = std::max(kMinWidth, 0.5 * n0);
  const uint64_t newest = count_ - 1;
  w_.assign(size_, 0);
  double w_max = 0;
  for (size_t i = 0; i < size_; ++i) {
    const Sample& s = ring_[i];
    const double age = static_cast<double>(newest - s.step);
    const double dn = (s.n - n0) / width;
    // Normalized by the newest step's weight at the query's count: weights are relative.
    w_[i] = std::exp2(-age / kHalfLife) * std::exp(-0.5 * dn * dn);
    w_max = std::max(w_max, w_[i]);
  }
  if (!(w_max > 0)) return out;
  // Weight 1 for the steps most like the query, so the priors' kPriorWeight means steps.
  for (double& w : w_) w /= w_max;
  w0_ = w_;
  // Robust fit (Tukey's biweight, a few reweighting rounds): stalls on a busy machine are
  // frequent and can be a hundred times a step, so a least-squares line, or one whose outliers
  // keep a bounded pull (Huber), sits far above the quiet steps. The first round measures
  // residuals from the median step near the query.
  auto robust_scale = [&] {
    scratch_.clear();
    for (size_t i = 0; i < size_; ++i) {
      if (w0_[i] >= kRelevant) scratch_.push_back(std::abs(resid_[i]));
    }
    if (scratch_.empty()) return 0.0;
    const auto mid = scratch_.begin() + static_cast<std::ptrdiff_t>(scratch_.size() / 2);
    std::nth_element(scratch_.begin(), mid, scratch_.end());
    return 1.4826 * *mid;
  };
  scratch_.clear();
  for (size_t i = 0; i < size_; ++i) {
    if (w0_[i] >= kRelevant) scratch_.push_back(ring_[i].seconds);
  }
  if (scratch_.empty()) return out;
  const auto mid = scratch_.begin() + static_cast<std::ptrdiff_t>(scratch_.size() / 2);
  std::nth_element(scratch_.begin(), mid, scratch_.end());
  const double median = *mid;
  resid_.assign(size_, 0);
  for (size_t i = 0; i < size_; ++i) resid_[i] = ring_[i].seconds - median;
  bool have = false;
  for (int round = 0; round < kRounds; ++round) {
    const double scale = robust_scale();
    for (size_t i = 0; i < size_; ++i) {
      const double u = scale > 0 ? resid_[i] / (kTukey * scale) : 0;
      w_[i] = std::abs(u) < 1 ? w0_[i] * (1 - u * u) * (1 - u * u) : 0;
    }
    Fit f;
    if (!solve(n0, p0, per_row, dims, f)) break;
    out = f;
    have = true;
    for (size_t i = 0; i < size_; ++i) {
      const Sample& s = ring_[i];
      const double x2 = dims > 2 ? (s.p - p0) / per_row : 0;
      resid_[i] = s.seconds - (out.beta[0] + out.beta[1] * (s.n - n0) + out.beta[2] * x2);
    }
  }
  if (!have) return Fit{};
  out.known = true;
  out.per_row = per_row;
  out.positions = positions;
  return out;
}

}  // namespace lift
