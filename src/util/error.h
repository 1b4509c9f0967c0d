// lift reports bad input (files, requests, options) with exceptions carrying a message
// that says what is wrong and, where it helps, how to fix it.
#pragma once

#include <stdexcept>
#include <string>

namespace lift {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace lift
