#pragma once
// "Why is this free?": the teaching text behind the metrics panel's info button. It explains
// why speculative decoding costs (almost) nothing on memory-bound hardware, with the loaded
// model's own numbers: the bytes a decode pass reads, the measured plain decode step and
// verification pass, and the acceptance rate. Pure function of MetricsData (tested directly).
#include <QString>

#include "panel_data.h"

namespace tokenscope::ui {

// Rich text (a few short paragraphs). Numbers not measured yet are said to be missing, and
// the text says how to get them (turn speculation on, send a message).
QString speculationExplanation(const MetricsData& metrics);

}  // namespace tokenscope::ui
