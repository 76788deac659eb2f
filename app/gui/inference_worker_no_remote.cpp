// The InferenceWorker in a build without the HTTP libraries (no app/remote): remote mode is
// never entered, and asking for it says why.
#include "inference_worker.h"

namespace tokenscope::app {

std::shared_ptr<remote::RemoteEngine> InferenceWorker::current_remote() const {
    return nullptr;
}

void InferenceWorker::set_remote(std::shared_ptr<remote::RemoteEngine>) {}

void InferenceWorker::stop() {
    stop_requested_.store(true);
}

void InferenceWorker::connectRemote(const RemoteSettings&) {
    emit loadFailed(
        tr("This build of tokenscope cannot connect to servers: it was built without "
           "cpp-httplib and nlohmann-json."));
}

bool InferenceWorker::send_remote_panels() {
    return false;
}

void InferenceWorker::send_remote_attention(int, int) {}

void InferenceWorker::generate_remote(qint64, const QVector<ChatTurn>&,
                                      const ui::SamplingSettings&) {}

}  // namespace tokenscope::app
