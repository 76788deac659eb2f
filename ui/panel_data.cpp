#include "panel_data.h"

#include <QCoreApplication>

namespace tokenscope::ui {

// Queued signals carry these types between the worker thread and the GUI thread.
void register_panel_types() {
    qRegisterMetaType<TokenData>();
    qRegisterMetaType<KvBlockMapData>();
    qRegisterMetaType<AttentionData>();
    qRegisterMetaType<MetricsData>();
    qRegisterMetaType<MemoryBudgetData>();
    qRegisterMetaType<ModelInfoData>();
    qRegisterMetaType<SamplingSettings>();
}

QString beforeSettingsName() {
    return QCoreApplication::translate("tokenscope::ui", "before sampling settings");
}

QString afterSettingsName() {
    return QCoreApplication::translate("tokenscope::ui", "after sampling settings");
}

QString settingsDistributionsExplanation() {
    return QCoreApplication::translate(
        "tokenscope::ui",
        "Before sampling settings: softmax of the model's raw logits. After sampling settings: "
        "after repetition penalty, top-k, top-p, min-p and temperature; what the token is drawn "
        "from.");
}

}  // namespace tokenscope::ui
