// Where tests find the shared read-only models (../shared/models beside the checkout).
#pragma once

#include <string>

namespace lift::test {

inline std::string model_path(const std::string& rel) {
  return std::string(LIFT_SOURCE_DIR) + "/../shared/models/" + rel;
}
inline std::string lift_binary() { return LIFT_BINARY; }

}  // namespace lift::test
