// Per-target linkage for code compiled with instruction-set flags.
//
// Files named *_avx2.cpp, *_avx512.cpp and *_amx.cpp are compiled with -m flags (CMakeLists.txt)
// and run only once runtime dispatch has checked the CPU (kernels/isa.h). Any inline function
// or template they instantiate from a shared header becomes a weak definition in their object,
// and the linker keeps one copy of each: if it kept the AVX-512 copy of, say, f16_to_f32, the
// baseline code calling it would die with SIGILL on a CPU without AVX-512. So:
//  * the build defines LIFT_TARGET_NS (target_avx2, target_avx512, target_amx) for those files;
//    everything else gets target_base. Shared headers put their inline functions and templates
//    in `inline namespace LIFT_TARGET_NS`, which gives each instruction set its own copies
//    under its own names while callers keep writing kernels::f16_to_f32;
//  * code compiled per target calls no inline member function of a shared type and no
//    standard-library template with an out-of-line body (std::min, std::copy, std::unique_ptr,
//    ...): it uses the helpers below instead. Types themselves are shared (they have no code).
// scripts/check_isa_linkage.sh checks the objects of a build for any weak function defined
// under two flag sets, and runs in CI.
#pragma once

#if !defined(LIFT_TARGET_NS)
// Only *_avx2/*_avx512/*_amx.cpp get -m flags, and LIFT_TARGET_NS with them. Baseline code
// built with AVX2 enabled (-march=native?) would make a binary that does not run on every
// x86-64.
#if defined(__AVX2__) || defined(__AVX512F__)
#error "baseline code compiled with AVX2/AVX-512 enabled; build lift without -march/-m flags"
#endif
#define LIFT_TARGET_NS target_base
#endif

namespace lift::kernels {
inline namespace LIFT_TARGET_NS {

// std::bit_cast, std::min and std::max, per target.
template <class To, class From>
constexpr To bits_as(const From& from) {
  return __builtin_bit_cast(To, from);
}
template <class T>
constexpr T min_of(T a, T b) {
  return b < a ? b : a;
}
template <class T>
constexpr T max_of(T a, T b) {
  return a < b ? b : a;
}

}  // namespace LIFT_TARGET_NS
}  // namespace lift::kernels
