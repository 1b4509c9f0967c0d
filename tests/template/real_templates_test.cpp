// Every chat template in ../shared/models (GGUF tokenizer.chat_template keys and HF
// tokenizer_config.json files), every template under tests/template/templates and lift's
// builtins, rendered
// on every conversation of tests/template/conversations.json, must match Python's Jinja2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gguf/gguf_file.h"
#include "template/builtin_chat_templates.h"
#include "template/oracle.h"
#include "test_paths.h"

namespace lift {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Source {
  std::string label;
  std::string text;
};

std::vector<Source> all_templates() {
  std::vector<Source> out;
  for (const auto& e : fs::directory_iterator(test::model_path("vocab"))) {
    if (e.path().extension() != ".gguf") continue;
    const gguf::File f = gguf::File::open(e.path().string());
    if (const auto t = f.get_string("tokenizer.chat_template")) {
      out.push_back({e.path().filename().string(), std::string(*t)});
    }
  }
  for (const auto& e : fs::directory_iterator(test::model_path("tokenizers"))) {
    const fs::path cfg = e.path() / "tokenizer_config.json";
    if (!fs::exists(cfg)) continue;
    const auto j = nlohmann::ordered_json::parse(read_file(cfg));
    if (j.contains("chat_template") && j["chat_template"].is_string()) {
      out.push_back({"tokenizers/" + e.path().filename().string(), j["chat_template"]});
    }
  }
  for (const auto& e :
       fs::directory_iterator(fs::path(LIFT_SOURCE_DIR) / "tests/template/templates")) {
    out.push_back({e.path().filename().string(), read_file(e.path())});
  }
  for (std::string_view name : tmpl::builtin_chat_template_names()) {
    out.push_back(
        {"builtin " + std::string(name), std::string(*tmpl::builtin_chat_template(name))});
  }
  std::sort(out.begin(), out.end(),
            [](const Source& a, const Source& b) { return a.label < b.label; });
  return out;
}

TEST(ChatTemplatesVsJinja2, EveryTemplateOnEveryConversation) {
  const std::vector<Source> templates = all_templates();
  // 4 GGUF vocabularies and 2 tokenizer configs carry templates today.
  ASSERT_GE(templates.size(), 6u + 10u + 7u);
  const auto convs = nlohmann::ordered_json::parse(
                         read_file(fs::path(LIFT_SOURCE_DIR) / "tests/template/conversations.json"))
                         .at("conversations");
  std::vector<test::OracleCase> cases;
  for (const Source& t : templates) {
    for (const auto& c : convs) {
      nlohmann::ordered_json ctx = {
          {"messages", c["messages"]},
          {"tools", c.contains("tools") ? c["tools"] : nlohmann::ordered_json()},
          {"documents", nullptr},
          {"add_generation_prompt", c["add_generation_prompt"]},
          {"bos_token", "<s>"},
          {"eos_token", "</s>"}};
      if (c.contains("kwargs")) ctx.update(c["kwargs"]);
      cases.push_back({t.label + " x " + c["name"].get<std::string>(), t.text, ctx});
    }
  }
  const size_t agreed = test::expect_agreement(cases);
  EXPECT_EQ(agreed, cases.size());
}

}  // namespace
}  // namespace lift
