// Runtime choice of the instruction set the kernels use. Each kernel family has one
// implementation per Isa; all of them are compiled in and the active one is picked at run time,
// so one binary runs everywhere and tests can exercise every path the CPU supports.
#pragma once

#include <optional>
#include <string_view>

namespace lift::kernels {

// Ordered: a higher value needs a superset of the CPU features of a lower one.
enum class Isa { scalar = 0, avx2 = 1, avx512 = 2, amx = 3 };

// The best the CPU supports: avx2 needs AVX2+FMA+F16C+BMI2, avx512 additionally
// AVX-512 F/BW/VL/DQ/VNNI, amx additionally AVX512-BF16 and AMX-TILE/AMX-BF16/AMX-INT8 tiles the
// kernel lets this process use (Linux grants them on request, which detection makes).
Isa best_isa();

// The Isa kernels dispatch to: best_isa(), or LIFT_ISA=scalar|avx2|avx512|amx from the environment
// (read once, capped at best_isa(); an unknown value is reported on stderr and ignored).
Isa active_isa();

// Overrides the active Isa (tests, benchmarks). Throws std::invalid_argument above best_isa().
void set_isa(Isa isa);

std::string_view isa_name(Isa isa);
std::optional<Isa> parse_isa(std::string_view name);

}  // namespace lift::kernels
