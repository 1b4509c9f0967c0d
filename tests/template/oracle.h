// Runs tests/template/jinja_oracle.py (Python's Jinja2 in Hugging Face's chat-template
// environment) on a batch of template x context cases, and compares lift's interpreter
// with it: the same output byte for byte, or an error in both (raise_exception with the
// same message).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "template/template.h"

namespace lift::test {

struct OracleCase {
  std::string label;
  std::string source;
  nlohmann::json context;    // an object
  int64_t now = 1764547200;  // strftime_now() sees this time (2025-12-01)
};

// One result per case: {"output": str} or {"error": str, "raise": bool}. Fails the calling
// test (and returns an empty list) when Python or its Jinja2 cannot be run.
inline nlohmann::json run_oracle(const std::vector<OracleCase>& cases) {
  nlohmann::ordered_json in = {{"cases", nlohmann::ordered_json::array()}};
  for (const OracleCase& c : cases) {
    in["cases"].push_back({{"template", c.source}, {"context", c.context}, {"now", c.now}});
  }
  char path[] = "/tmp/lift_jinja_oracle_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) {
    ADD_FAILURE() << "cannot create a temporary file";
    return {};
  }
  close(fd);
  std::ofstream(path) << in.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::strict);
  const std::string cmd =
      "python3 " + std::string(LIFT_SOURCE_DIR) + "/tests/template/jinja_oracle.py " + path;
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    const int rc = pclose(p);
    std::remove(path);
    if (rc != 0) {
      ADD_FAILURE() << "the Jinja2 oracle failed (is python3-jinja2 installed? "
                       "scripts/bootstrap.sh installs it): "
                    << cmd;
      return {};
    }
  }
  nlohmann::json results = nlohmann::json::parse(out);
  EXPECT_EQ(results.size(), cases.size());
  return results;
}

struct LiftResult {
  bool ok = false;
  bool raised = false;
  std::string text;  // output or error message
};

inline LiftResult render_with_lift(const OracleCase& c) {
  LiftResult r;
  try {
    const tmpl::Template t(c.source);
    tmpl::RenderOptions opts;
    opts.now_unix = c.now;
    const tmpl::Value ctx = tmpl::from_json(c.context);
    r.text = t.render(ctx.obj(), opts);
    r.ok = true;
  } catch (const tmpl::TemplateRaise& e) {
    r.raised = true;
    r.text = e.what();
  } catch (const tmpl::TemplateError& e) {
    r.text = e.what();
  }
  return r;
}

// Checks every case against the oracle; returns how many agreed.
inline size_t expect_agreement(const std::vector<OracleCase>& cases) {
  const nlohmann::json want = run_oracle(cases);
  size_t agreed = 0;
  for (size_t i = 0; i < cases.size() && i < want.size(); ++i) {
    const LiftResult got = render_with_lift(cases[i]);
    const nlohmann::json& w = want[i];
    if (w.contains("output")) {
      const std::string expected = w["output"].get<std::string>();
      EXPECT_TRUE(got.ok) << cases[i].label << ": Jinja2 renders it, lift fails: " << got.text;
      if (got.ok) {
        EXPECT_EQ(got.text, expected) << cases[i].label;
        agreed += got.text == expected ? 1 : 0;
      }
    } else {
      EXPECT_FALSE(got.ok) << cases[i].label << ": Jinja2 fails (" << w["error"]
                           << "), lift renders: " << got.text;
      if (w["raise"].get<bool>()) {
        EXPECT_TRUE(got.raised) << cases[i].label
                                << ": expected raise_exception, got: " << got.text;
        EXPECT_EQ(got.text, w["error"].get<std::string>()) << cases[i].label;
        agreed += got.raised && got.text == w["error"].get<std::string>() ? 1 : 0;
      } else {
        agreed += got.ok ? 0 : 1;
      }
    }
  }
  return agreed;
}

}  // namespace lift::test
