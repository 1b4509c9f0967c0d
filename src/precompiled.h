// Standard and third-party headers most of the library's translation units parse, compiled once
// per build (target_precompile_headers). Files built with their own instruction-set flags
// (*_avx2.cpp, *_avx512.cpp, *_amx.cpp) skip it: a precompiled header must be built with the
// flags of the file that uses it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
