// Chat templates: family detection from realistic tokenizer.chat_template sources, the exact
// prompt text of each family for one system + user + assistant + user conversation, stop
// strings and BOS handling, errors, and the default model's file.
//
// Golden values: the expected prompts are written out by hand from each family's published
// format (see chat_template.h); while writing this test they were also cross-checked against
// Jinja2 renderings of the official templates with Hugging Face's settings (trim_blocks,
// lstrip_blocks). The conversation has untrimmed content on purpose, since families differ in
// whether they trim.
#include <QtTest>

#include <memory>

#include "gguf/file.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/test_paths.h"

using namespace tokenscope;
using tokenizer::ChatMessage;
using tokenizer::ChatTemplate;
using tokenizer::ChatTemplateKind;

Q_DECLARE_METATYPE(tokenscope::tokenizer::ChatTemplateKind)

namespace {

const std::vector<ChatMessage>& conversation() {
    static const std::vector<ChatMessage> messages{
        {"system", "You are a terse assistant."},
        {"user", "  What is 2+2? "},
        {"assistant", " 4\n"},
        {"user", "And 3+3?"},
    };
    return messages;
}

// Abbreviated but realistic template sources: the control flow and literal markers of each
// family's published template (written for this test, not copied).
const char* const kGemmaSource = R"({{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- set role = "model" if message['role'] == 'assistant' else message['role'] -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {{- message['content'] | trim }}{{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%})";

const char* const kLlama2Source =
    R"({% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %})"
    R"({% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %})"
    R"({% set system_message = false %}{% endif %}{% for message in loop_messages %})"
    R"({% if loop.index0 == 0 and system_message != false %})"
    R"({% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %})"
    R"({% else %}{% set content = message['content'] %}{% endif %})"
    R"({% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }})"
    R"({% elif message['role'] == 'assistant' %}{{ ' ' + content.strip() + ' ' + eos_token }})"
    R"({% endif %}{% endfor %})";

const char* const kLlama3Source =
    R"({% set loop_messages = messages %}{% for message in loop_messages %})"
    R"({% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + )"
    R"(message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %})"
    R"({% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %})"
    R"({% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %})";

const char* const kChatMLSource =
    R"({% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'])"
    R"( + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %})"
    R"({{ '<|im_start|>assistant\n' }}{% endif %})";

const char* const kMistralSource = R"({%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token }}
    {%- endif %}
{%- endfor %})";

const char* const kPhi3Source =
    R"({% for message in messages %}{% if message['role'] == 'system' %})"
    R"({{ '<|system|>\n' + message['content'] + '<|end|>\n' }}{% elif message['role'] == 'user' %})"
    R"({{ '<|user|>\n' + message['content'] + '<|end|>\n' }}{% elif message['role'] == 'assistant' %})"
    R"({{ '<|assistant|>\n' + message['content'] + '<|end|>\n' }}{% endif %}{% endfor %})"
    R"({% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %})";

const char* const kZephyrSource =
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n"
    "{{ '<|user|>\\n' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'system' %}\n"
    "{{ '<|system|>\\n' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'assistant' %}\n"
    "{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\n{% endif %}\n"
    "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n"
    "{% endfor %}";

}  // namespace

class TestChatTemplate : public QObject {
    Q_OBJECT

  private slots:
    void families_data() {
        QTest::addColumn<QByteArray>("source");
        QTest::addColumn<ChatTemplateKind>("kind");
        QTest::addColumn<QByteArray>("name");
        QTest::addColumn<QByteArray>("expected");  // with add_generation_prompt
        QTest::addColumn<bool>("writesBos");

        // Gemma: system text + blank line prefixed to the first user turn; content trimmed;
        // assistant turns are "model".
        QTest::newRow("gemma") << QByteArray(kGemmaSource) << ChatTemplateKind::Gemma
                               << QByteArray("gemma")
                               << QByteArray(
                                      "<bos><start_of_turn>user\n"
                                      "You are a terse assistant.\n\nWhat is 2+2?<end_of_turn>\n"
                                      "<start_of_turn>model\n4<end_of_turn>\n"
                                      "<start_of_turn>user\nAnd 3+3?<end_of_turn>\n"
                                      "<start_of_turn>model\n")
                               << true;
        // Llama 2: <<SYS>> block inside the first [INST]; the whole first turn is stripped at
        // its ends only, so the user's leading spaces after the block survive.
        QTest::newRow("llama2") << QByteArray(kLlama2Source) << ChatTemplateKind::Llama2
                                << QByteArray("llama2")
                                << QByteArray(
                                       "<s>[INST] <<SYS>>\nYou are a terse assistant.\n<</SYS>>\n\n"
                                       "  What is 2+2? [/INST] 4 </s>"
                                       "<s>[INST] And 3+3? [/INST]")
                                << true;
        QTest::newRow("llama3") << QByteArray(kLlama3Source) << ChatTemplateKind::Llama3
                                << QByteArray("llama3")
                                << QByteArray(
                                       "<|begin_of_text|>"
                                       "<|start_header_id|>system<|end_header_id|>\n\n"
                                       "You are a terse assistant.<|eot_id|>"
                                       "<|start_header_id|>user<|end_header_id|>\n\n"
                                       "What is 2+2?<|eot_id|>"
                                       "<|start_header_id|>assistant<|end_header_id|>\n\n"
                                       "4<|eot_id|>"
                                       "<|start_header_id|>user<|end_header_id|>\n\n"
                                       "And 3+3?<|eot_id|>"
                                       "<|start_header_id|>assistant<|end_header_id|>\n\n")
                                << true;
        // ChatML: content verbatim.
        QTest::newRow("chatml") << QByteArray(kChatMLSource) << ChatTemplateKind::ChatML
                                << QByteArray("chatml")
                                << QByteArray(
                                       "<|im_start|>system\nYou are a terse assistant.<|im_end|>\n"
                                       "<|im_start|>user\n  What is 2+2? <|im_end|>\n"
                                       "<|im_start|>assistant\n 4\n<|im_end|>\n"
                                       "<|im_start|>user\nAnd 3+3?<|im_end|>\n"
                                       "<|im_start|>assistant\n")
                                << false;
        // Mistral v3: system prompt on the last user turn; user content verbatim, assistant
        // content trimmed after one space.
        QTest::newRow("mistral") << QByteArray(kMistralSource) << ChatTemplateKind::Mistral
                                 << QByteArray("mistral")
                                 << QByteArray(
                                        "<s>[INST]   What is 2+2? [/INST] 4</s>"
                                        "[INST] You are a terse assistant.\n\nAnd 3+3?[/INST]")
                                 << true;
        QTest::newRow("phi3") << QByteArray(kPhi3Source) << ChatTemplateKind::Phi3
                              << QByteArray("phi3")
                              << QByteArray(
                                     "<|system|>\nYou are a terse assistant.<|end|>\n"
                                     "<|user|>\n  What is 2+2? <|end|>\n"
                                     "<|assistant|>\n 4\n<|end|>\n"
                                     "<|user|>\nAnd 3+3?<|end|>\n"
                                     "<|assistant|>\n")
                              << false;
        QTest::newRow("zephyr") << QByteArray(kZephyrSource) << ChatTemplateKind::Zephyr
                                << QByteArray("zephyr")
                                << QByteArray(
                                       "<|system|>\nYou are a terse assistant.</s>\n"
                                       "<|user|>\n  What is 2+2? </s>\n"
                                       "<|assistant|>\n 4\n</s>\n"
                                       "<|user|>\nAnd 3+3?</s>\n"
                                       "<|assistant|>\n")
                                << false;
    }

    void families() {
        QFETCH(QByteArray, source);
        QFETCH(ChatTemplateKind, kind);
        QFETCH(QByteArray, name);
        QFETCH(QByteArray, expected);
        QFETCH(bool, writesBos);

        const auto tmpl = ChatTemplate::detect(source.toStdString());
        QCOMPARE(tmpl.kind(), kind);
        QCOMPARE(QByteArray(tmpl.name()), name);
        QCOMPARE(QByteArray::fromStdString(tmpl.format(conversation(), true)), expected);
        QCOMPARE(tmpl.template_writes_bos(), writesBos);
        QCOMPARE(ChatTemplate::of_name(name.toStdString()).kind(), kind);
        QCOMPARE(ChatTemplate::of_kind(kind).kind(), kind);
        QVERIFY(!tmpl.stop_strings().empty());
    }

    void generationPromptSwitch() {
        // Without the generation prompt: the same text minus the open assistant turn; Llama 2
        // and Mistral have no such turn; Phi-3's template then ends with its eos_token.
        const auto without = [](ChatTemplateKind kind) {
            return ChatTemplate::of_kind(kind).format(conversation(), false);
        };
        QCOMPARE(without(ChatTemplateKind::Gemma),
                 std::string("<bos><start_of_turn>user\n"
                             "You are a terse assistant.\n\nWhat is 2+2?<end_of_turn>\n"
                             "<start_of_turn>model\n4<end_of_turn>\n"
                             "<start_of_turn>user\nAnd 3+3?<end_of_turn>\n"));
        QCOMPARE(without(ChatTemplateKind::Llama3).ends_with("And 3+3?<|eot_id|>"), true);
        QCOMPARE(without(ChatTemplateKind::ChatML).ends_with("And 3+3?<|im_end|>\n"), true);
        QCOMPARE(without(ChatTemplateKind::Zephyr).ends_with("And 3+3?</s>\n"), true);
        QCOMPARE(without(ChatTemplateKind::Phi3),
                 std::string("<|system|>\nYou are a terse assistant.<|end|>\n"
                             "<|user|>\n  What is 2+2? <|end|>\n"
                             "<|assistant|>\n 4\n<|end|>\n"
                             "<|user|>\nAnd 3+3?<|end|>\n<|endoftext|>"));
        for (const auto kind : {ChatTemplateKind::Llama2, ChatTemplateKind::Mistral}) {
            const auto t = ChatTemplate::of_kind(kind);
            QCOMPARE(t.format(conversation(), false), t.format(conversation(), true));
        }
    }

    void withoutSystemMessage() {
        const std::vector<ChatMessage> messages{{"user", "Hi"}};
        QCOMPARE(ChatTemplate::of_kind(ChatTemplateKind::Gemma).format(messages, true),
                 std::string("<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"));
        QCOMPARE(ChatTemplate::of_kind(ChatTemplateKind::Llama2).format(messages, true),
                 std::string("<s>[INST] Hi [/INST]"));
        QCOMPARE(ChatTemplate::of_kind(ChatTemplateKind::Mistral).format(messages, true),
                 std::string("<s>[INST] Hi[/INST]"));
        // Mistral v3 puts the system prompt on the last turn only when that turn is the user's.
        const std::vector<ChatMessage> ends_with_assistant{
            {"system", "S"}, {"user", "U"}, {"assistant", "A"}};
        QCOMPARE(ChatTemplate::of_kind(ChatTemplateKind::Mistral).format(ends_with_assistant, true),
                 std::string("<s>[INST] U[/INST] A</s>"));
    }

    void fallback() {
        // Unknown and empty templates; an architecture hint only helps where it is unambiguous.
        QCOMPARE(ChatTemplate::detect("").kind(), ChatTemplateKind::Fallback);
        QCOMPARE(ChatTemplate::detect("{% for m in messages %}{{ m.content }}{% endfor %}").kind(),
                 ChatTemplateKind::Fallback);
        QCOMPARE(ChatTemplate::detect("", "llama").kind(), ChatTemplateKind::Fallback);
        QCOMPARE(ChatTemplate::detect("", "gemma3").kind(), ChatTemplateKind::Gemma);
        QCOMPARE(ChatTemplate::detect(kChatMLSource, "gemma3").kind(), ChatTemplateKind::ChatML);

        const auto t = ChatTemplate::detect("");
        QCOMPARE(QByteArray(t.name()), QByteArray("fallback"));
        QCOMPARE(t.format(conversation(), true),
                 std::string("System: You are a terse assistant.\n\n"
                             "User: What is 2+2?\n\n"
                             "Assistant: 4\n\n"
                             "User: And 3+3?\n\n"
                             "Assistant:"));
        QCOMPARE(t.stop_strings(), std::vector<std::string>{"\nUser:"});
        QVERIFY(!t.template_writes_bos());
    }

    void phi3WithComputedRoleTags() {
        // Phi-3's first published template builds the tag from the role and never spells out
        // <|user|>: detection rests on <|end|>.
        const char* source =
            "{{ bos_token }}{% for message in messages %}{{'<|' + message['role'] + '|>' + '\\n' + "
            "message['content'] + '<|end|>\\n' }}{% endfor %}{% if add_generation_prompt %}"
            "{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}";
        QCOMPARE(ChatTemplate::detect(source).kind(), ChatTemplateKind::Phi3);
    }

    void stopStringsAndBos() {
        using K = ChatTemplateKind;
        const auto stops = [](K kind) { return ChatTemplate::of_kind(kind).stop_strings(); };
        QCOMPARE(stops(K::Gemma), (std::vector<std::string>{"<end_of_turn>", "<eos>"}));
        QCOMPARE(stops(K::Llama2), (std::vector<std::string>{"</s>"}));
        QCOMPARE(stops(K::Llama3), (std::vector<std::string>{"<|eot_id|>", "<|end_of_text|>"}));
        QCOMPARE(stops(K::ChatML), (std::vector<std::string>{"<|im_end|>", "<|endoftext|>"}));
        QCOMPARE(stops(K::Mistral), (std::vector<std::string>{"</s>"}));
        QCOMPARE(stops(K::Phi3), (std::vector<std::string>{"<|end|>", "<|endoftext|>"}));
        QCOMPARE(stops(K::Zephyr), (std::vector<std::string>{"</s>"}));
    }

    void invalidRolesAreNamed() {
        const auto t = ChatTemplate::of_kind(ChatTemplateKind::ChatML);
        const std::vector<ChatMessage> bad{{"user", "hi"}, {"tool", "{}"}};
        try {
            (void)t.format(bad, true);
            QFAIL("no exception");
        } catch (const InvalidArgument& e) {
            QVERIFY2(QString(e.what()).contains("\"tool\""), e.what());
        }
        // Roles are case-sensitive, as in the official templates.
        const std::vector<ChatMessage> capital{{"User", "hi"}};
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, (void)t.format(capital, true));

        // Families that fold the system prompt into a turn take it only first.
        const std::vector<ChatMessage> late_system{{"user", "hi"}, {"system", "be nice"}};
        for (const auto kind :
             {ChatTemplateKind::Gemma, ChatTemplateKind::Llama2, ChatTemplateKind::Mistral})
            QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                     (void)ChatTemplate::of_kind(kind).format(late_system, true));
        // The others render it as its own turn.
        QCOMPARE(
            ChatTemplate::of_kind(ChatTemplateKind::ChatML).format(late_system, false),
            std::string("<|im_start|>user\nhi<|im_end|>\n<|im_start|>system\nbe nice<|im_end|>\n"));

        QVERIFY_THROWS_EXCEPTION(InvalidArgument, ChatTemplate::of_name("vicuna"));
    }

    void defaultModelIsGemma() {
        const std::string path = test::gemma_model();
        if (path.empty())
            QSKIP(
                "the default model gemma-3-270m-q4_k_m.gguf is not installed (tools/setup-deps "
                "installs it); skipping the real-template check");
        const auto file = gguf::File::open(path);
        const auto source = file.optional_string("tokenizer.chat_template", "");
        const auto architecture = file.optional_string("general.architecture", "");
        if (source.empty()) {
            // This conversion carries no tokenizer.chat_template; the architecture decides.
            qInfo("%s has no tokenizer.chat_template; detecting from general.architecture = %s",
                  path.c_str(), architecture.c_str());
        } else {
            QCOMPARE(ChatTemplate::detect(source).kind(), ChatTemplateKind::Gemma);
        }
        const auto tmpl = ChatTemplate::detect(source, architecture);
        QCOMPARE(tmpl.kind(), ChatTemplateKind::Gemma);

        // The prompt text tokenizes into the model's control tokens: <bos> = 2,
        // <start_of_turn> = 105, <end_of_turn> = 106 (the ids test_tokenizer_gemma checks), with
        // exactly one BOS because the template writes it and add_bos stays off.
        const auto tok = tokenizer::Tokenizer::from_gguf(file);
        QVERIFY(tmpl.template_writes_bos());
        tokenizer::EncodeOptions options;
        options.parse_special = true;
        const auto ids = tok.encode(tmpl.format(conversation(), true), options);
        QVERIFY(ids.size() > 4);
        QCOMPARE(ids[0], 2);
        QCOMPARE(ids[1], 105);
        QCOMPARE(std::count(ids.begin(), ids.end(), 2), std::ptrdiff_t{1});
        QCOMPARE(std::count(ids.begin(), ids.end(), 105), std::ptrdiff_t{4});
        QCOMPARE(std::count(ids.begin(), ids.end(), 106), std::ptrdiff_t{3});
        for (const auto& stop : tmpl.stop_strings()) QVERIFY(tok.token_id(stop).has_value());
    }
};

QTEST_APPLESS_MAIN(TestChatTemplate)
#include "test_chat_template.moc"
