#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "kernels/isa.h"
#include "util/error.h"

namespace {

// Last resort for an exception that escapes a thread (or a noexcept function): instead of the
// runtime's "terminate called ...", say what happened, then abort as std::terminate would.
[[noreturn]] void on_terminate() {
  if (const std::exception_ptr ep = std::current_exception()) {
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "lift: fatal error: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "lift: fatal error: an unknown exception\n");
    }
  } else {
    std::fprintf(stderr, "lift: fatal error: std::terminate called (an internal bug)\n");
  }
  std::fflush(stderr);
  std::abort();
}

}  // namespace

int main(int argc, char** argv) {
  std::set_terminate(on_terminate);
  try {
    CLI::App app{"lift: an LLM inference and serving engine"};
    // The kernel path is part of what a bug report needs (and what the test script asks).
    const std::string isa(lift::kernels::isa_name(lift::kernels::best_isa()));
    app.set_version_flag("--version", "lift 0.1 (best kernel path on this CPU: " + isa + ")");
    app.require_subcommand(1);
    std::vector<std::pair<CLI::App*, lift::cli::Runner>> commands;
    auto add = [&](lift::cli::Runner (*f)(CLI::App&)) {
      const size_t before = app.get_subcommands({}).size();
      lift::cli::Runner r = f(app);
      commands.emplace_back(app.get_subcommands({})[before], std::move(r));
    };
    add(lift::cli::add_generate);
    add(lift::cli::add_make_model);
    add(lift::cli::add_make_draft);
    add(lift::cli::add_bench);
    add(lift::cli::add_serve);
    add(lift::cli::add_chat);
    CLI11_PARSE(app, argc, argv);
    for (auto& [sub, run] : commands) {
      if (sub->parsed()) return run();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lift: error: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "lift: error: an unknown exception\n");
    return 1;
  }
  return 1;
}
