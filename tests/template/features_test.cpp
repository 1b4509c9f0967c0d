// Small templates, one language feature each (tests/template/features.json), rendered by
// lift and by Python's Jinja2 on the same context: the outputs must be identical, or both
// must fail.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "template/oracle.h"

namespace lift {
namespace {

TEST(TemplateFeaturesVsJinja2, EveryFeatureCase) {
  std::ifstream in(std::string(LIFT_SOURCE_DIR) + "/tests/template/features.json");
  ASSERT_TRUE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  const auto j = nlohmann::ordered_json::parse(ss.str());
  const nlohmann::ordered_json& shared = j.at("context");
  std::vector<test::OracleCase> cases;
  for (const auto& c : j.at("cases")) {
    nlohmann::ordered_json ctx = shared;
    if (c.contains("context")) ctx.update(c["context"]);
    const std::string src = c.at("t").get<std::string>();
    cases.push_back({src.substr(0, 80), src, ctx});
  }
  ASSERT_GE(cases.size(), 100u);
  EXPECT_EQ(test::expect_agreement(cases), cases.size());
}

}  // namespace
}  // namespace lift
