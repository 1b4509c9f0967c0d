// Wall-clock timing shared by the CLI's commands.
#pragma once

#include <chrono>

namespace lift::cli {

using Clock = std::chrono::steady_clock;

// A duration in seconds.
inline double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace lift::cli
