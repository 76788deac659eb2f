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
    qRegisterMetaType<SpeculationSettings>();
}

QString speculationModeName(SpeculationSettings::Mode mode) {
    switch (mode) {
        case SpeculationSettings::Mode::Lookup:
            return QStringLiteral("lookup");
        case SpeculationSettings::Mode::Draft:
            return QStringLiteral("draft");
        case SpeculationSettings::Mode::Off:
            break;
    }
    return QStringLiteral("off");
}

SpeculationSettings::Mode speculationModeFromName(const QString& name) {
    if (name == QLatin1String("lookup")) return SpeculationSettings::Mode::Lookup;
    if (name == QLatin1String("draft")) return SpeculationSettings::Mode::Draft;
    return SpeculationSettings::Mode::Off;
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
