#include "server_timeline_model.h"

#include <QCoreApplication>
#include <algorithm>

namespace tokenscope::app {

namespace {
QString tr(const char* text, const char* disambiguation = nullptr, int n = -1) {
    return QCoreApplication::translate("tokenscope::app::ServerTimelineModel", text, disambiguation,
                                       n);
}
}  // namespace

int ServerTimelineModel::kindOf(const std::string& name) {
    using Cell = ui::BatchTimelineCell;
    if (name == "prefill") return Cell::Prefill;
    if (name == "decode") return Cell::Decode;
    if (name == "verify") return Cell::Verify;
    if (name == "waiting") return Cell::Waiting;
    if (name == "preempted") return Cell::Preempted;
    return Cell::Absent;
}

namespace {
// A JSON step number: an integer, not negative (parsed text gives unsigned, built JSON signed).
bool is_count(const nlohmann::json& v) {
    return v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0);
}
}  // namespace

bool ServerTimelineModel::add(const nlohmann::json& page, QString* error) {
    const auto fail = [&](const QString& why) {
        if (error) *error = why;
        return false;
    };
    if (!page.is_object() || !page.contains("steps") || !page["steps"].is_array() ||
        !page.contains("next") || !is_count(page["next"]))
        return fail(tr("not a schedule: no 'steps' list and 'next' step number"));
    // Checked whole before anything is kept, so that a bad answer changes nothing.
    for (const auto& step : page["steps"]) {
        if (!step.is_object() || !step.contains("step") || !is_count(step["step"]) ||
            !step.contains("entries") || !step["entries"].is_array())
            return fail(tr("a step without a number or entries"));
        for (const auto& e : step["entries"]) {
            if (!e.is_object() || !e.contains("request") || !e["request"].is_string() ||
                !e.contains("kind") || !e["kind"].is_string() || !e.contains("tokens") ||
                !e["tokens"].is_number_integer())
                return fail(tr("an entry without request, kind and tokens"));
        }
    }
    for (const auto& step : page["steps"]) {
        const auto number = step["step"].get<std::uint64_t>();
        if (number < next_) continue;  // seen already
        if (number > next_ && next_ > 0) skipped_ += number - next_;
        Step kept;
        kept.number = number;
        for (const auto& e : step["entries"]) {
            const std::string id = e["request"].get<std::string>();
            auto [it, inserted] = index_of_.emplace(id, int(requests_.size()));
            if (inserted) requests_.push_back(id);
            kept.cells.push_back(
                {it->second,
                 {kindOf(e["kind"].get<std::string>()),
                  int(std::clamp<std::int64_t>(e["tokens"].get<std::int64_t>(), 0, 1 << 30))}});
        }
        if (step.contains("budget") && step["budget"].is_number_integer())
            budget_ = step["budget"].get<int>();
        steps_.push_back(std::move(kept));
        next_ = number + 1;
    }
    while (steps_.size() > kShownSteps) steps_.pop_front();
    next_ = std::max(next_, page["next"].get<std::uint64_t>());
    if (page.contains("budget") && page["budget"].is_number_integer() &&
        page["budget"].get<int>() > 0)
        budget_ = page["budget"].get<int>();
    return true;
}

ui::BatchTimelineData ServerTimelineModel::data(std::size_t max_steps) const {
    ui::BatchTimelineData d;
    d.budget = budget_;
    const auto first =
        steps_.begin() + std::ptrdiff_t(steps_.size() - std::min(max_steps, steps_.size()));
    // The requests with a cell among the shown steps, in order of first appearance.
    std::vector<int> row_of(requests_.size(), -1);
    std::vector<int> shown;
    for (auto s = first; s != steps_.end(); ++s)
        for (const auto& [request, cell] : s->cells)
            if (row_of[std::size_t(request)] < 0) {
                row_of[std::size_t(request)] = 0;
                shown.push_back(request);
            }
    std::sort(shown.begin(), shown.end());
    for (std::size_t r = 0; r < shown.size(); ++r) {
        row_of[std::size_t(shown[r])] = int(r);
        const QString id = QString::fromStdString(requests_[std::size_t(shown[r])]);
        d.rows << QStringLiteral("#%1 …%2").arg(shown[r] + 1).arg(id.right(6));
    }
    for (auto s = first; s != steps_.end(); ++s) {
        QVector<ui::BatchTimelineCell> cells(d.rows.size());
        for (const auto& [request, cell] : s->cells) cells[row_of[std::size_t(request)]] = cell;
        d.steps.push_back(std::move(cells));
    }
    return d;
}

QString ServerTimelineModel::summary(std::size_t max_steps) const {
    if (steps_.empty()) return tr("No engine steps yet: the server has had no request to run.");
    const ui::BatchTimelineData d = data(max_steps);
    QString text = tr("the last %n steps", nullptr, int(d.steps.size())) + QStringLiteral(" · ") +
                   tr("%n requests", nullptr, int(d.rows.size())) + QStringLiteral(" · ") +
                   tr("the last step computed %1 of %2 tokens")
                       .arg(d.scheduledTokens(int(d.steps.size()) - 1))
                       .arg(budget_);
    if (skipped_ > 0)
        text += QStringLiteral(" · ") +
                tr("%n steps came and went between two polls", nullptr, int(skipped_));
    return text;
}

}  // namespace tokenscope::app
