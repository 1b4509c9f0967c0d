// The lift command line: each subcommand registers itself on the CLI11 app and runs when
// chosen. Frontends only: they parse options, call the library and print.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace lift::cli {

using Runner = std::function<int()>;

Runner add_generate(CLI::App& app);
Runner add_make_model(CLI::App& app);
Runner add_make_draft(CLI::App& app);
Runner add_bench(CLI::App& app);
Runner add_serve(CLI::App& app);
Runner add_chat(CLI::App& app);
// `lift bench model`, registered under `lift bench`; run returns -1 when not chosen.
void add_bench_model(CLI::App* bench, std::function<int()>& run);
void add_bench_serve(CLI::App* bench, std::function<int()>& run);
void add_bench_structured(CLI::App* bench, std::function<int()>& run);

}  // namespace lift::cli
