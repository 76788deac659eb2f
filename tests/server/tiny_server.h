#pragma once
// The OpenAI-compatible server in-process on a tiny ChatML model (made at test time), shared by
// the server, remote-client, CLI and worker suites.
#include <functional>
#include <memory>
#include <string>

#include "api_server.h"
#include "reference/tiny_model.h"
#include "runtime/engine.h"

namespace tokenscope::test {

// ChatML, so the chat path renders the model's own template (the trained test tokenizer has no
// <|im_start|> token: the markers are encoded as text, which is all these suites need).
inline const char* const kChatMlTemplate =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

inline std::string chatml_model_path() {
    TinyModelSpec spec;
    spec.chat_template = kChatMlTemplate;
    return tiny_model_path("llama-chatml", spec);
}

inline std::unique_ptr<runtime::Engine> load_chatml_engine() {
    runtime::EngineOptions o;
    o.threads = 2;
    o.kv_capacity_tokens = 1024;
    return runtime::Engine::load(chatml_model_path(), o);
}

// Started on a free loopback port (ApiServer::port()), model id "tiny"; `tweak` adjusts the
// options first.
inline std::unique_ptr<server::ApiServer> start_tiny_server(
    const std::function<void(server::ServerOptions&)>& tweak = nullptr) {
    server::ServerOptions o;
    o.port = 0;
    o.model_id = "tiny";
    if (tweak) tweak(o);
    auto s = std::make_unique<server::ApiServer>(load_chatml_engine(), o);
    s->start();
    return s;
}

}  // namespace tokenscope::test
