#pragma once
// The engine on its own thread. Commands arrive as queued calls (loadModel, generate,
// requestAttention); results leave as queued signals. stop() and cancelLoad() are the only
// members the GUI thread calls directly: they set atomic flags the worker polls between
// steps, so the GUI never waits for the engine.
//
//   QThread thread; auto* worker = new InferenceWorker; worker->moveToThread(&thread);
//   connect(&thread, &QThread::finished, worker, &QObject::deleteLater); thread.start();
//   QMetaObject::invokeMethod(worker, "loadModel", Qt::QueuedConnection, Q_ARG(...));
#include <QElapsedTimer>
#include <QObject>
#include <QStringList>
#include <QVector>
#include <atomic>
#include <memory>
#include <mutex>

#include "inspect/model_cost.h"
#include "model_summary.h"
#include "panel_data.h"
#include "teaching_data.h"

namespace tokenscope::runtime {
class Engine;
class PromptBuilder;
struct EngineOptions;
}  // namespace tokenscope::runtime
namespace tokenscope::remote {
class RemoteEngine;
}  // namespace tokenscope::remote

namespace tokenscope::app {

class SpeculationMeter;

struct ChatTurn {
    QString role;  // "system", "user", "assistant"
    QString content;
};

struct LoadOptions {
    int threads = 0;  // 0: one per core
    int kv_capacity_tokens = 4096;
    QString kv_type = "f16";  // f16, f32, q8
    QString device = "auto";  // cpu, cuda, auto (CUDA when a usable GPU is registered and present)
    // A built-in chat template family (tokenizer/chat_template.h: "chatml", "llama3", …) used
    // instead of the model's own; empty: the model's own.
    QString chat_template;
    ui::SpeculationSettings speculation;
};

// The engine options the app's load options stand for (the worker's engine, and the one
// File › Serve this model… loads). Throws InvalidArgument for an unknown KV type.
runtime::EngineOptions engine_options(const LoadOptions& options);

// A server speaking the OpenAI API (File › Connect to server…, `tokenscope --remote URL`).
struct RemoteSettings {
    QString url;      // http(s)://host:port[/v1]
    QString api_key;  // empty: none
    QString model;    // empty: the first the server lists
};

class InferenceWorker : public QObject {
    Q_OBJECT

  public:
    explicit InferenceWorker(QObject* parent = nullptr);
    ~InferenceWorker() override;

    // Thread-safe: may be called from any thread. A remote reply's stream is closed at once,
    // also while the server is still prefilling.
    void stop();
    // Thread-safe: forgets a Stop. The window calls it before queueing a new reply, so a Stop
    // pressed right after Send (before the worker picked the reply up) is kept, and a Stop that
    // came after the last reply ended does not cancel the next one. Each reply also clears it
    // when it ends.
    void clearStop() { stop_requested_.store(false); }
    void cancelLoad() { cancel_load_.store(true); }

  public slots:
    void loadModel(const QString& path, const tokenscope::app::LoadOptions& options);
    // Formats `turns` with the model's chat template and generates the assistant's answer.
    // The conversation id keys the engine's cache: the next turn prefills only new tokens.
    void generate(qint64 conversation, const QVector<tokenscope::app::ChatTurn>& turns,
                  const tokenscope::ui::SamplingSettings& settings);
    // Sends attentionChanged for the current conversation's captured weights.
    void requestAttention(int layer, int head);
    // Frees a conversation's cached tokens (deleted conversation).
    void forgetConversation(qint64 conversation);
    // With a model loaded, the engine swaps its proposer (Engine::set_speculation): the model
    // is not loaded again and cached conversations keep their KV cache. If that fails (a
    // draft model with another vocabulary, a missing file) the previous setting stays and
    // speculationFailed says why. Without a model, the setting applies to the next load.
    void setSpeculation(const tokenscope::ui::SpeculationSettings& settings);
    // Chat with a model on a server instead (inference_worker_remote.cpp): checks the server and
    // the model (GET /v1/models), then modelLoaded (info.remote) or loadFailed with one line.
    // The local engine is released; loadModel goes back to a local model.
    void connectRemote(const tokenscope::app::RemoteSettings& settings);

    // Step mode (inference_worker_teaching.cpp): beginStepping submits the reply like generate()
    // but returns at once; each stepOnce() then runs the engine until it has produced exactly one
    // token (the first call: the whole prefill), sends tokenGenerated and stepTaken, and returns.
    // Between calls the worker's event loop is idle, so the GUI never waits and nothing blocks.
    // The reply ends with generationFinished as usual (stop(): the next stepOnce cancels it).
    void beginStepping(qint64 conversation, const QVector<tokenscope::app::ChatTurn>& turns,
                       const tokenscope::ui::SamplingSettings& settings);
    void stepOnce();
    // Every head of `layer` over query rows [first_query, first_query + rows) of the current
    // capture: stepAttentionChanged (for a step already taken, after a layer change).
    void requestStepAttention(int layer, int first_query, int rows);
    // Every head of `layer` over the last rows of the current capture: headGridChanged.
    void requestHeadGrid(int layer);
    // Entropy and mean distance of every layer x head: headOverviewChanged.
    void requestHeadOverview();

  signals:
    void loadProgress(int percent, const QString& stage);
    void modelLoaded(const tokenscope::ui::ModelInfoData& info);
    void loadFailed(const QString& message);
    void loadCancelled();
    // The speculation the loaded engine runs with (after every load and setSpeculation).
    void speculationApplied(const tokenscope::ui::SpeculationSettings& settings);
    // The chosen speculation could not be set up; the engine runs without it (or, after
    // setSpeculation, with what it had). One message for the user.
    void speculationFailed(const QString& message);

    void generationStarted(qint64 conversation, int prompt_tokens);
    void tokenGenerated(qint64 conversation, const tokenscope::ui::TokenData& token);
    // complete = false when the user stopped it; text is everything generated.
    void generationFinished(qint64 conversation, const QString& text, const QString& reason,
                            bool complete);
    void generationFailed(qint64 conversation, const QString& message);
    // The model's own chat template could not be used (it failed to parse, or refused this
    // conversation) and the built-in family format was used instead: one line for the user.
    void promptNotice(const QString& message);

    void metricsChanged(const tokenscope::ui::MetricsData& metrics);
    void kvChanged(const tokenscope::ui::KvBlockMapData& kv);
    void memoryChanged(const tokenscope::ui::MemoryBudgetData& memory);
    void attentionChanged(const tokenscope::ui::AttentionData& attention);
    void stepTaken(qint64 conversation, const tokenscope::ui::StepData& step);
    void stepAttentionChanged(const tokenscope::ui::HeadGridData& grid);
    void headGridChanged(const tokenscope::ui::HeadGridData& grid);
    void headOverviewChanged(const tokenscope::ui::HeadOverviewData& overview);

  private:
    // The reply being generated: what generate() and step mode share.
    struct Reply {
        qint64 conversation = -1;
        bool stepped = false;
        ui::SamplingSettings settings;
        QString text;
        ui::MetricsData metrics;
        QElapsedTimer since_attention;
        QElapsedTimer since_panels;
        QString reason = "stopped";
        bool complete = false;
        int steps = 0;
        ui::TokenData last_token;
    };
    // Submits the request; false (generationFailed + generationFinished sent) when it cannot.
    bool begin_reply(qint64 conversation, const QVector<ChatTurn>& turns,
                     const ui::SamplingSettings& settings, bool stepped);
    // One engine step and its events; returns how many tokens it produced for the reply.
    int step_reply();
    void end_reply();
    void fail_reply(const QString& message);
    ui::HeadGridData head_grid(int layer, qint64 first_query, qint64 rows) const;
    void generate_remote(qint64 conversation, const QVector<ChatTurn>& turns,
                         const ui::SamplingSettings& settings);
    // The KV panel from the server's /tokenscope/v1/kv (ours) or /metrics (others); false when
    // the server gave neither (the reply's stream then stops asking until it ends).
    bool send_remote_panels();
    // The last reply's attention from tokenscope-cli serve (GET /tokenscope/v1/attention).
    void send_remote_attention(int layer, int head);
    std::string remote_reply_id_;  // the last finished remote reply's completion id
    std::shared_ptr<remote::RemoteEngine> current_remote() const;
    void set_remote(std::shared_ptr<remote::RemoteEngine> remote);

    void send_panels(bool include_attention);
    // Appends a context position's label and bytes (labels_, pieces_).
    void add_position(std::int32_t token);
    std::unique_ptr<runtime::Engine> load_engine(const LoadOptions& options) const;
    // Makes `engine` the current one (prompt builder, cost numbers, panels).
    void install_engine(std::unique_ptr<runtime::Engine> engine, const QString& chat_template);

    std::unique_ptr<runtime::Engine> engine_;
    std::unique_ptr<runtime::PromptBuilder> prompts_;
    std::atomic<bool> stop_requested_{false};
    std::atomic<bool> cancel_load_{false};
    // The conversation the panels show, its token labels and capture.
    qint64 current_conversation_ = -1;
    qint64 current_request_ = -1;
    QStringList labels_;
    QVector<QByteArray> pieces_;  // each position's bytes, for the chat's attention overlay
    int prompt_tokens_ = -1;      // of the current request
    int attention_layer_ = 0;
    int attention_head_ = -1;
    int step_layer_ = 0;  // the layer step mode shows
    inspect::ModelCost cost_;
    HeadStatistics head_statistics_;  // the Heads overview's running sums
    std::unique_ptr<Reply> reply_;
    QString model_path_;
    LoadOptions options_;  // what the current engine was loaded with
    std::unique_ptr<SpeculationMeter> speculation_;
    // The server in remote mode (null: local). Guarded because stop() reads it from the GUI
    // thread to close the stream.
    mutable std::mutex remote_mutex_;
    std::shared_ptr<remote::RemoteEngine> remote_;
    QString remote_metrics_note_;  // why the server's KV usage is unknown (no /metrics...)
};

void register_worker_types();

}  // namespace tokenscope::app

Q_DECLARE_METATYPE(tokenscope::app::ChatTurn)
Q_DECLARE_METATYPE(tokenscope::app::LoadOptions)
Q_DECLARE_METATYPE(tokenscope::app::RemoteSettings)
