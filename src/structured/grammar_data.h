// The compiled grammar's tables, shared by grammar.cpp (which builds them) and matcher.cpp
// (which runs them). Not part of the public interface.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "structured/grammar.h"

namespace lift::structured {

struct Grammar::Data {
  static constexpr uint8_t kAccepting = 1;  // the rule may end here
  static constexpr uint8_t kHasBytes = 2;   // some byte leads on
  static constexpr uint8_t kHasCalls = 4;   // some rule is called from here

  struct Call {
    int32_t rule;
    int32_t ret;  // state the caller continues in once the rule ends
  };
  // States of all rules share one numbering; a rule's states are contiguous.
  struct State {
    uint32_t next_begin;  // next[next_begin + byte_class[b]]: state after byte b, or -1
    uint32_t class_map;   // offset of the rule's 256-byte class map in class_maps
    uint32_t call_begin;  // calls[call_begin .. call_begin + n_calls)
    uint16_t n_calls;
    uint8_t flags;
  };
  struct Rule {
    std::string name;
    int32_t start;
    int32_t first_state, n_states;
  };

  std::vector<Rule> rules;
  std::vector<State> states;
  std::vector<int32_t> state_rule;
  std::vector<int32_t> next;
  std::vector<uint8_t> class_maps;
  std::vector<Call> calls;
  int32_t start_rule = -1;

  int32_t step(int32_t s, uint8_t b) const {
    const State& st = states[static_cast<size_t>(s)];
    return next[st.next_begin + class_maps[st.class_map + b]];
  }
  uint8_t flags(int32_t s) const { return states[static_cast<size_t>(s)].flags; }
};

}  // namespace lift::structured
