#include "kernels/isa.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace lift::kernels {
namespace {

// clang 14's __builtin_cpu_supports does not know "f16c", so that bit comes from cpuid leaf 1
// (it is only usable with AVX enabled by the OS, which the avx2 check below implies).
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

// AMX tile data is off by default for Linux processes; one arch_prctl asks for it for the whole
// process (all threads). Then XCR0 must show the tile state enabled.
bool amx_usable() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  const bool tile = (edx & (1u << 24)) != 0, bf16 = (edx & (1u << 22)) != 0;
  const bool int8 = (edx & (1u << 25)) != 0;  // K-quant prompt products (TDPBSUD)
  if (!tile || !bf16 || !int8) return false;
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr long kReqXcompPerm = 0x1023, kXfeatureTileData = 18;
  if (syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureTileData) != 0) return false;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  constexpr unsigned kTileState = (1u << 17) | (1u << 18);
  return (lo & kTileState) == kTileState;
#else
  return false;
#endif
}

Isa detect() {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c() &&
                    __builtin_cpu_supports("bmi2");
  if (!avx2) return Isa::scalar;
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vnni");
  if (!avx512) return Isa::avx2;
  return __builtin_cpu_supports("avx512bf16") && amx_usable() ? Isa::amx : Isa::avx512;
}

Isa from_env(Isa best) {
  const char* env = std::getenv("LIFT_ISA");
  if (env == nullptr || *env == '\0') return best;
  const auto want = parse_isa(env);
  if (!want) {
    std::fprintf(stderr, "lift: ignoring unknown LIFT_ISA=%s (use scalar|avx2|avx512|amx)\n", env);
    return best;
  }
  if (*want > best) {
    std::fprintf(stderr, "lift: LIFT_ISA=%s is not supported by this CPU, using %s\n", env,
                 std::string(isa_name(best)).c_str());
    return best;
  }
  return *want;
}

std::atomic<Isa>& active() {
  static std::atomic<Isa> isa{from_env(best_isa())};
  return isa;
}

}  // namespace

Isa best_isa() {
  static const Isa best = detect();
  return best;
}

Isa active_isa() { return active().load(std::memory_order_relaxed); }

void set_isa(Isa isa) {
  if (isa > best_isa()) {
    throw std::invalid_argument("set_isa: " + std::string(isa_name(isa)) +
                                " is not supported by this CPU");
  }
  active().store(isa, std::memory_order_relaxed);
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return "scalar";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
    case Isa::amx:
      return "amx";
  }
  return "unknown";
}

std::optional<Isa> parse_isa(std::string_view name) {
  if (name == "scalar") return Isa::scalar;
  if (name == "avx2") return Isa::avx2;
  if (name == "avx512") return Isa::avx512;
  if (name == "amx") return Isa::amx;
  return std::nullopt;
}

}  // namespace lift::kernels
