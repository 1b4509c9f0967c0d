// Headers nearly every test translation unit parses: compiled once per build
// (target_precompile_headers) instead of once per test file. Only third-party and standard
// headers belong here, so that editing a lift header does not rebuild every test.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>
