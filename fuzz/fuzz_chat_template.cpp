// Fuzz target for the chat-template engine: any bytes as a template (and as a JSON context) must
// give a rendered text or a TemplateError, never a crash, a hang or unbounded memory. Rendering
// runs with small step and output limits so that a fuzzer-made endless loop ends quickly.
#include <cstdint>
#include <string_view>

#include "jinja/json.h"
#include "jinja/template.h"

namespace {

tokenscope::jinja::Object conversation() {
    using tokenscope::jinja::Value;
    auto message = [](const char* role, const char* content) {
        tokenscope::jinja::Object m;
        m.set("role", Value::from(role));
        m.set("content", Value::from(content));
        return Value::from(std::move(m));
    };
    tokenscope::jinja::Object ctx;
    ctx.set("messages", Value::from(tokenscope::jinja::Array{message("system", "Be brief."), message("user", "Hi 你好"),
                                                            message("assistant", "<think>x</think>Hello")}));
    ctx.set("add_generation_prompt", Value::from(true));
    ctx.set("bos_token", Value::from("<s>"));
    ctx.set("eos_token", Value::from("</s>"));
    return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    try {
        (void)tokenscope::jinja::parse_json(input);
    } catch (const tokenscope::jinja::TemplateError&) {
    }
    static const tokenscope::jinja::Object context = conversation();
    tokenscope::jinja::RenderOptions options;
    options.max_steps = 100'000;
    options.max_output_bytes = 1 << 20;
    try {
        (void)tokenscope::jinja::Template(input).render(context, options);
    } catch (const tokenscope::jinja::TemplateError&) {
    }
    return 0;
}
