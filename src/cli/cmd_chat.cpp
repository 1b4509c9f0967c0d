// lift chat: a terminal conversation using the model's chat template. Each turn resubmits the
// whole conversation; the prefix cache keeps the earlier turns' K/V, so only the new turn is
// computed. Replies stream as the engine steps. Reads stdin line by line, so it can be
// scripted; /reset starts over, /exit quits.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "engine/engine.h"
#include "server/chat_template.h"
#include "util/error.h"

namespace lift::cli {

namespace {

struct ChatOptions {
  std::string model = "../shared/models/stories260K/stories260K.gguf";
  std::string system;
  std::string chat_template;
  int max_tokens = 256;
  float temperature = 0.8f;
  float top_p = 0.95f;
  int64_t seed = 0;
  EngineOptions engine;
};

int run_chat(const ChatOptions& o) {
  const std::unique_ptr<LlamaModel> draft = o.engine.load_draft_model();
  auto model = LlamaModel::load(o.model);
  const Tokenizer tok = Tokenizer::from_gguf(model->file());
  const ChosenTemplate chosen = choose_chat_template(model->file(), o.chat_template);
  Engine engine(*model, tok, o.engine.to_config(draft.get()));
  print_memory_plan(engine);
  std::fprintf(stderr, "lift: %s\nlift: type a message; /reset starts over, /exit quits\n",
               chosen.note.c_str());

  ChatInput conv;  // the same renderer and context as the server's chat requests
  nlohmann::ordered_json& messages = conv.messages;
  if (!o.system.empty()) messages.push_back({{"role", "system"}, {"content", o.system}});
  std::string line;
  int turn = 0;
  while (true) {
    std::fputs("> ", stderr);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line == "/reset") {
      if (messages.size() > (o.system.empty() ? 0u : 1u)) {
        messages.erase(messages.begin() + (o.system.empty() ? 0 : 1), messages.end());
      }
      continue;
    }
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    ChatPrompt cp;
    try {
      cp = build_chat_prompt(tok, chosen.tmpl, conv);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "lift: %s\n", e.what());
      messages.erase(messages.size() - 1);
      continue;
    }
    RequestParams p;
    p.max_tokens = o.max_tokens;
    p.sampling.temperature = o.temperature;
    p.sampling.top_p = o.top_p;
    p.sampling.seed = static_cast<uint64_t>(o.seed) + static_cast<uint64_t>(turn++);
    p.stop_token_ids = cp.stop_token_ids;
    p.stop = cp.stop;
    Submitted sub;
    try {
      sub = engine.add_request(cp.tokens, p);
    } catch (const Error& e) {
      // E.g. the conversation outgrew the context: say so and let the user /reset.
      std::fprintf(stderr, "lift: %s (/reset starts over)\n", e.what());
      messages.erase(messages.size() - 1);
      continue;
    }
    std::string reply;
    int cached = 0, prompt = 0;
    // Stepping on this thread: each step's text is shown before the next step runs.
    for (bool more = true; more;) {
      more = engine.step();
      while (auto out = sub.stream->try_pop()) {
        std::fputs(out->text.c_str(), stdout);
        std::fflush(stdout);
        reply += out->text;
        if (out->finish == FinishReason::error) throw Error(out->error);
        if (out->finish != FinishReason::none) {
          cached = out->cached_tokens;
          prompt = out->prompt_tokens;
        }
      }
    }
    std::fputs("\n", stdout);
    std::fflush(stdout);
    std::fprintf(stderr, "lift: turn %d: prompt %d tokens, %d of them from the prefix cache\n",
                 turn, prompt, cached);
    messages.push_back({{"role", "assistant"}, {"content", reply}});
  }
  return 0;
}

}  // namespace

Runner add_chat(CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  CLI::App* c = app.add_subcommand("chat", "Chat in the terminal (reads stdin)");
  c->add_option("-m,--model", o->model, "GGUF model file");
  c->add_option("--system", o->system, "System message");
  c->add_option("--chat-template", o->chat_template,
                "Builtin name, Jinja file or inline template instead of the model's");
  c->add_option("-n,--max-tokens", o->max_tokens, "Most tokens per reply");
  c->add_option("--temp", o->temperature, "Temperature");
  c->add_option("--top-p", o->top_p, "Top-p");
  c->add_option("-s,--seed", o->seed, "Seed of the first turn");
  add_engine_options(c, o->engine);
  return [o] { return run_chat(*o); };
}

}  // namespace lift::cli
