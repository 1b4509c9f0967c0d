// The lift command line: each subcommand registers itself on the CLI11 app and runs when
// chosen. Frontends only: they parse options, call the library and print.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace lift::cli {

using Runner = std::function<int()>;

Runner add_generate(CLI::App& app);
Runner add_make_model(CLI::App& app);
Runner add_bench(CLI::App& app);
Runner add_serve(CLI::App& app);
Runner add_chat(CLI::App& app);

}  // namespace lift::cli
