#pragma once
// The server timeline's data: the answers of GET /tokenscope/v1/schedule (a tokenscope server's
// recent engine steps) accumulated into the BatchTimelineView's rows and cells. Plain data, no
// network: ServerTimelineWindow polls, this keeps what the polls brought.
//
// Rows are requests in the order they first appear, labelled "#n …tail of the id"; only the last
// kShownSteps steps are kept, and a request with no cell among them drops out of the rows. A
// poll that finds steps missing before its first (the server keeps only its last 512) counts
// them as skipped rather than drawing a seam nobody can see.
#include <QString>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "batch_timeline_view.h"

namespace tokenscope::app {

class ServerTimelineModel {
  public:
    static constexpr std::size_t kShownSteps = 300;

    // Adds one answer; false, with why, when it is not one (the model is then unchanged).
    bool add(const nlohmann::json& page, QString* error = nullptr);
    // What to ask for next (the `since` of the next poll).
    std::uint64_t next() const { return next_; }
    // The last `max_steps` kept steps (all by default) and the requests with a cell in them.
    ui::BatchTimelineData data(std::size_t max_steps = kShownSteps) const;
    std::size_t stepCount() const { return steps_.size(); }
    std::uint64_t skippedSteps() const { return skipped_; }
    int budget() const { return budget_; }
    // "120 steps · 3 requests · the last step computed 17 of 64 tokens".
    // Of the last `max_steps` steps, as data(max_steps) shows them.
    QString summary(std::size_t max_steps = kShownSteps) const;
    // The cell kind for a schedule entry's kind name; Absent for a name it does not know.
    static int kindOf(const std::string& name);

  private:
    struct Step {
        std::uint64_t number = 0;
        std::vector<std::pair<int, ui::BatchTimelineCell>> cells;  // (request index, cell)
    };
    std::deque<Step> steps_;
    std::vector<std::string> requests_;    // every id seen, in order of first appearance
    std::map<std::string, int> index_of_;  // id -> position in requests_
    std::uint64_t next_ = 0;
    std::uint64_t skipped_ = 0;
    int budget_ = 0;
};

}  // namespace tokenscope::app
