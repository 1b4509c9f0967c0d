#include <cstdio>
#include <exception>
#include <vector>

#include "cli/commands.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"lift: an LLM inference and serving engine"};
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, lift::cli::Runner>> commands;
  auto add = [&](lift::cli::Runner (*f)(CLI::App&)) {
    const size_t before = app.get_subcommands({}).size();
    lift::cli::Runner r = f(app);
    commands.emplace_back(app.get_subcommands({})[before], std::move(r));
  };
  add(lift::cli::add_generate);
  add(lift::cli::add_make_model);
  add(lift::cli::add_bench);
  add(lift::cli::add_serve);
  add(lift::cli::add_chat);
  CLI11_PARSE(app, argc, argv);
  try {
    for (auto& [sub, run] : commands) {
      if (sub->parsed()) return run();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lift: error: %s\n", e.what());
    return 1;
  }
  return 1;
}
