// PromptBuilder: the model's own chat template is what renders a chat (rendering itself is
// checked byte for byte against Python's jinja2 by compare_with_jinja2); these tests check the
// choices around it: when the family format is used instead, and that the user hears why;
// BOS written by the template is not doubled; enable_thinking reaches the template; stop tokens.
// Expected prompt texts are worked out by hand from the small templates below.
#include <QtTest>

#include <algorithm>

#include "runtime/engine.h"
#include "runtime/prompt_builder.h"
#include "reference/tiny_model.h"

using namespace tokenscope;

namespace {

std::unique_ptr<runtime::Engine> load_with_template(const std::string& name, const std::string& chat_template) {
    test::TinyModelSpec spec;
    spec.chat_template = chat_template;
    runtime::EngineOptions o;
    o.threads = 1;
    return runtime::Engine::load(test::tiny_model_path("prompt-" + name, spec), o);
}

// ChatML with a default system prompt, the shape of SmolLM2's and Qwen 2.5's templates.
const char* const kChatMLWithDefaultSystem =
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are tiny.<|im_end|>\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

std::vector<tokenizer::ChatMessage> hi() { return {{"user", "Hi"}}; }

}  // namespace

class TestPromptBuilder : public QObject {
    Q_OBJECT

private slots:
    void modelTemplateRendersTheChat() {
        auto engine = load_with_template("chatml", kChatMLWithDefaultSystem);
        runtime::PromptBuilder prompts(*engine, std::nullopt);
        QVERIFY(prompts.uses_model_template());
        QVERIFY(prompts.template_problem().empty());
        QCOMPARE(QString::fromStdString(prompts.description()), QStringLiteral("model's own (chatml family)"));
        std::string warning = "stale";
        const auto messages = hi();
        QCOMPARE(prompts.render(messages, &warning),
                 std::string("<|im_start|>system\nYou are tiny.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                             "<|im_start|>assistant\n"));
        QVERIFY(warning.empty());
        // The built-in ChatML format has no default system prompt: the difference proves that
        // the model's template, not the family format, rendered the text.
        QVERIFY(prompts.render(messages) != tokenizer::ChatTemplate::of_kind(tokenizer::ChatTemplateKind::ChatML).format(messages, true));
    }

    void namedTemplateOverridesTheModels() {
        auto engine = load_with_template("chatml", kChatMLWithDefaultSystem);
        runtime::PromptBuilder prompts(*engine, std::string("chatml"));
        QVERIFY(!prompts.uses_model_template());
        QCOMPARE(QString::fromStdString(prompts.description()), QStringLiteral("chatml (chosen)"));
        QCOMPARE(prompts.render(hi()), std::string("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
    }

    void unparsableTemplateFallsBackWithAReason() {
        auto engine = load_with_template("broken", "<|im_start|>{% for m in messages %}{{ m.content }}");
        runtime::PromptBuilder prompts(*engine, std::nullopt);
        QVERIFY(!prompts.uses_model_template());
        const QString problem = QString::fromStdString(prompts.template_problem());
        QVERIFY2(problem.contains("line 1") && problem.contains("endfor") && problem.contains("chatml"), qPrintable(problem));
        QVERIFY(!problem.contains('\n'));
        QCOMPARE(prompts.render(hi()), std::string("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
        QVERIFY(QString::fromStdString(prompts.description()).contains("failed"));
        QVERIFY(!prompts.chat(hi()).prompt.empty());
    }

    void raisingTemplateFallsBackForThatConversation() {
        auto engine = load_with_template(
            "raises", std::string("{% if messages[0]['role'] == 'system' %}"
                                  "{{ raise_exception('System role not supported') }}{% endif %}") +
                          kChatMLWithDefaultSystem);
        runtime::PromptBuilder prompts(*engine, std::nullopt);
        QVERIFY(prompts.uses_model_template());
        std::string warning;
        const std::vector<tokenizer::ChatMessage> with_system = {{"system", "Be brief."}, {"user", "Hi"}};
        QCOMPARE(prompts.render(with_system, &warning),
                 std::string("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                             "<|im_start|>assistant\n"));
        const QString w = QString::fromStdString(warning);
        QVERIFY2(w.contains("System role not supported") && w.contains("line 1") && w.contains("chatml"), qPrintable(w));
        QVERIFY(!w.contains('\n'));
        // The next conversation, which the template accepts, clears the warning.
        QVERIFY(prompts.render(hi(), &warning).rfind("<|im_start|>system\nYou are tiny.", 0) == 0);
        QVERIFY(warning.empty());
    }

    void bosWrittenByTheTemplateIsNotDoubled() {
        auto engine = load_with_template("bos", "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}");
        const auto& tok = engine->tokenizer();
        QVERIFY(tok.bos_id() >= 0);
        runtime::PromptBuilder prompts(*engine, std::nullopt);
        const auto request = prompts.chat(hi());
        QVERIFY(request.prompt.size() > 2);
        QCOMPARE(request.prompt[0], tok.bos_id());
        QCOMPARE(std::count(request.prompt.begin(), request.prompt.end(), tok.bos_id()), std::ptrdiff_t{1});
        // Without the template writing it, the model's add_bos preference decides.
        auto plain = load_with_template("nobos", "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}");
        runtime::PromptBuilder plain_prompts(*plain, std::nullopt);
        const auto plain_request = plain_prompts.chat(hi());
        QCOMPARE(plain_request.prompt[0] == tok.bos_id(), plain->tokenizer().add_bos());
    }

    void enableThinkingReachesTheTemplate() {
        auto engine = load_with_template(
            "think", "{% if enable_thinking is defined and not enable_thinking %}NO-THINK {% endif %}{{ messages[-1].content }}");
        runtime::PromptBuilder prompts(*engine, std::nullopt);
        QCOMPARE(prompts.render(hi()), std::string("Hi"));
        prompts.set_enable_thinking(false);
        QCOMPARE(prompts.render(hi()), std::string("NO-THINK Hi"));
        prompts.set_enable_thinking(true);
        QCOMPARE(prompts.render(hi()), std::string("Hi"));
    }

    void stopStringsFollowTheFamily() {
        // A template of no known family: EOS ends the turn; the fallback's "\nUser:" would cut
        // answers that merely mention a user.
        auto unknown = load_with_template("unknown", "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}");
        runtime::PromptBuilder unknown_prompts(*unknown, std::nullopt);
        QVERIFY(unknown_prompts.chat(hi()).stop_strings.empty());
        auto chatml = load_with_template("chatml", kChatMLWithDefaultSystem);
        runtime::PromptBuilder chatml_prompts(*chatml, std::nullopt);
        const auto r = chatml_prompts.chat(hi());
        // ChatML's end of turn stops the reply: as a token where the vocabulary has it as a
        // control token, else as a string.
        const auto& tok = chatml->tokenizer();
        if (auto id = tok.token_id("<|im_end|>"); id && tok.is_control(*id)) {
            QVERIFY(std::find(r.stop_tokens.begin(), r.stop_tokens.end(), *id) != r.stop_tokens.end());
        } else {
            QVERIFY(std::find(r.stop_strings.begin(), r.stop_strings.end(), "<|im_end|>") != r.stop_strings.end());
        }
    }
};

QTEST_GUILESS_MAIN(TestPromptBuilder)
#include "test_prompt_builder.moc"
