// tokenscope: the desktop app.
//   tokenscope [--model FILE] [--kv-type f16|q8|f32] [--ctx N] [--threads N] [--store FILE]
//              [--screenshot FILE [--prompt TEXT]] [--size WxH]
// --screenshot starts the app, sends one prompt (a real exchange with the model), saves a
// PNG of the main window when the answer is complete, and quits.
#include <QApplication>
#include <QCommandLineParser>
#include <QFileInfo>
#include <QSize>
#include <QStringList>
#include <QTimer>
#include <algorithm>
#include <cstdio>

#include "chat_view.h"
#include "main_window.h"
#include "util/log.h"
#include "util/paths.h"

int main(int argc, char** argv) {
    // The command line is parsed before QApplication exists: --help, --version and a mistyped
    // option must work without a display (QApplication aborts when it finds no platform, and
    // QCommandLineParser::process() would need the application object first).
    QCoreApplication::setApplicationName("tokenscope");
    QCoreApplication::setOrganizationName("tokenscope");
    QCoreApplication::setApplicationVersion(TOKENSCOPE_VERSION_STRING);
    QStringList arguments;
    for (int i = 0; i < argc; ++i) arguments << QString::fromLocal8Bit(argv[i]);

    QCommandLineParser parser;
    parser.setApplicationDescription(
        "Chat with a local language model and see inside it while it runs.");
    const QCommandLineOption help_option = parser.addHelpOption();
    const QCommandLineOption version_option = parser.addVersionOption();
    QCommandLineOption model({"m", "model"}, "GGUF model to open.", "file");
    QCommandLineOption kv_type("kv-type", "KV cache element type: f16, q8 or f32.", "type", "f16");
    QCommandLineOption ctx("ctx", "KV cache capacity in tokens.", "tokens", "4096");
    QCommandLineOption threads("threads", "CPU threads (0: one per core).", "n", "0");
    QCommandLineOption device("device", "cpu, cuda or auto (CUDA when a usable GPU is present).",
                              "device", "auto");
    QCommandLineOption store("store", "Conversation database (default: the XDG data dir).", "file");
    QCommandLineOption screenshot(
        "screenshot", "Save a PNG of the window after one exchange, then quit.", "file");
    QCommandLineOption prompt("prompt", "The prompt sent for --screenshot.", "text",
                              "What is the capital of France?");
    QCommandLineOption log_level("log-level", "trace, debug, info, warn, error, critical or off.",
                                 "level");
    QCommandLineOption size(
        "size", "Initial window size, e.g. 1280x720 (default: fits the screen).", "WxH");
    QCommandLineOption remote("remote",
                              "Chat with a model on this OpenAI-compatible server instead (vLLM, "
                              "SGLang, llama-server, Ollama, tokenscope-cli serve).",
                              "url");
    QCommandLineOption api_key("api-key", "API key for --remote (or $TOKENSCOPE_API_KEY).", "key");
    QCommandLineOption remote_model("remote-model",
                                    "Model on the --remote server (default: its first).", "name");
    parser.addOptions({model, kv_type, ctx, threads, device, store, screenshot, prompt, log_level,
                       size, remote, api_key, remote_model});
    // Qt's own options (-platform, -style, ...) belong to QApplication: leave them to it.
    parser.setSingleDashWordOptionMode(QCommandLineParser::ParseAsLongOptions);
    if (!parser.parse(arguments)) {
        const QString error = parser.errorText();
        // Options QApplication understands are not errors here.
        static const QStringList kQtOptions = {
            "platform",           "style",         "stylesheet", "reverse",     "qwindowgeometry",
            "qwindowtitle",       "display",       "geometry",   "widgetcount", "session",
            "platformpluginpath", "platformtheme", "plugin",     "qwindowicon"};
        const QStringList unknown = parser.unknownOptionNames();
        const bool only_qt_options =
            !unknown.isEmpty() &&
            std::all_of(unknown.begin(), unknown.end(),
                        [](const QString& name) { return kQtOptions.contains(name); });
        if (!only_qt_options) {
            std::fprintf(stderr, "tokenscope: error: %s\nTry 'tokenscope --help'.\n",
                         qPrintable(error));
            return 2;
        }
    }
    if (parser.isSet(help_option)) {
        std::fputs(qPrintable(parser.helpText()), stdout);
        return 0;
    }
    if (parser.isSet(version_option)) {
        std::printf("tokenscope %s\n", TOKENSCOPE_VERSION_STRING);
        return 0;
    }
    QSize initial_size;
    if (parser.isSet(size)) {
        const QStringList parts = parser.value(size).split('x');
        if (parts.size() == 2) initial_size = QSize(parts[0].toInt(), parts[1].toInt());
        if (initial_size.width() < 320 || initial_size.height() < 240) {
            std::fprintf(stderr,
                         "tokenscope: error: --size '%s' is not WIDTHxHEIGHT (at least 320x240)\n",
                         qPrintable(parser.value(size)));
            return 2;
        }
    }

    // A screenshot has a fixed size unless asked otherwise, so that screenshots compare.
    if (!initial_size.isValid() && parser.isSet(screenshot)) initial_size = QSize(1500, 950);

    QApplication app(argc, argv);

    try {
        tokenscope::log::configure(
            parser.isSet(log_level)
                ? std::optional<std::string>(parser.value(log_level).toStdString())
                : std::nullopt);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tokenscope: error: %s\n", e.what());
        return 1;
    }

    tokenscope::app::MainWindowOptions options;
    options.model_path = parser.value(model);
    options.store = parser.isSet(store) ? std::filesystem::path(parser.value(store).toStdString())
                                        : tokenscope::app::ConversationStore::default_path();
    options.load.kv_type = parser.value(kv_type);
    options.load.kv_capacity_tokens = parser.value(ctx).toInt();
    options.load.threads = parser.value(threads).toInt();
    options.load.device = parser.value(device);
    if (parser.isSet(remote)) {
        options.remote.url = parser.value(remote);
        options.remote.api_key = parser.isSet(api_key) ? parser.value(api_key)
                                                       : qEnvironmentVariable("TOKENSCOPE_API_KEY");
        options.remote.model = parser.value(remote_model);
    }

    std::unique_ptr<tokenscope::app::MainWindow> window;
    try {
        window = std::make_unique<tokenscope::app::MainWindow>(options);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tokenscope: error: %s\n", e.what());
        return 1;
    }
    if (initial_size.isValid()) {
        window->resize(initial_size);
    } else if (!window->restoredGeometry()) {
        window->fitToScreen();
    }
    window->show();

    if (parser.isSet(screenshot)) {
        const QString file = parser.value(screenshot);
        const QString text = parser.value(prompt);
        // No model to load (a fresh install before the first download): the window as a new
        // user first sees it, once the event loop has laid it out.
        const QString wanted =
            parser.isSet(model)
                ? parser.value(model)
                : QString::fromStdString(tokenscope::paths::default_model().string());
        if (!parser.isSet(remote) && !QFileInfo::exists(wanted)) {
            QTimer::singleShot(1000, window.get(), [&] {
                const bool ok = window->grab().save(file);
                std::fprintf(stderr, "tokenscope: no model at %s; %s %s\n", qPrintable(wanted),
                             ok ? "saved" : "could not save", qPrintable(file));
                QApplication::exit(ok ? 0 : 1);
            });
            return QApplication::exec();
        }
        // The handlers run inside the QApplication::exec() below, after this block has ended:
        // they hold copies of the strings, and the window through a raw pointer (it outlives
        // the event loop).
        tokenscope::app::MainWindow* shown = window.get();
        QObject::connect(shown, &tokenscope::app::MainWindow::modelReadyChanged, shown,
                         [shown, text](bool ready) {
                             if (!ready) {
                                 std::fprintf(stderr,
                                              "tokenscope: error: the model did not load\n");
                                 QApplication::exit(1);
                                 return;
                             }
                             shown->newConversation();
                             shown->sendMessage(text);
                         });
        QObject::connect(shown, &tokenscope::app::MainWindow::generationDone, shown, [shown, file] {
            // Let the coalesced text, the heatmap render and the panels settle first.
            QTimer::singleShot(1500, shown, [shown, file] {
                const bool ok = shown->grab().save(file);
                std::fprintf(stderr, "tokenscope: %s %s\n", ok ? "saved" : "could not save",
                             qPrintable(file));
                QApplication::exit(ok ? 0 : 1);
            });
        });
        QTimer::singleShot(180000, shown, [] {
            std::fprintf(stderr, "tokenscope: error: no answer within 180 s\n");
            QApplication::exit(1);
        });
    }
    return QApplication::exec();
}
