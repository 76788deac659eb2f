#include "think_section.h"

#include <algorithm>

namespace tokenscope::ui {

namespace {

constexpr QStringView kOpen = u"<think>";
constexpr QStringView kClose = u"</think>";

// Length of the longest proper prefix of `tag` that the text ends with, looking no further back
// than `from`: those characters may still turn out to be the tag.
int partialTagAtEnd(QStringView text, QStringView tag, int from) {
    const int n = int(text.size());
    for (int k = std::min(int(tag.size()) - 1, n - from); k > 0; --k)
        if (text.last(k) == tag.first(k)) return k;
    return 0;
}

}  // namespace

ThinkSplitter::ThinkSplitter(bool enabled) : state_(enabled ? State::Start : State::Answer) {}

ThinkSplitter::Part ThinkSplitter::partAt(int offset) const {
    if (open_end_ < 0) return Part::Answer;
    if (answer_begin_ >= 0 && offset >= answer_begin_) return Part::Answer;
    if (reasoning_begin_ >= 0 && offset >= reasoning_begin_ &&
        (reasoning_end_ < 0 || offset < reasoning_end_))
        return Part::Thinking;
    return Part::Tag;
}

void ThinkSplitter::noteReasoning(QStringView text, int from, int to) {
    if (reasoning_begin_ >= 0) return;
    for (int i = from; i < to; ++i) {
        if (!text[i].isSpace()) {
            reasoning_begin_ = i;
            return;
        }
    }
}

void ThinkSplitter::closeAt(QStringView text, int close) {
    close_begin_ = close;
    // The whitespace between the tags and the reasoning is layout, not reasoning.
    int begin = open_end_;
    while (begin < close && text[begin].isSpace()) ++begin;
    int end = close;
    while (end > begin && text[end - 1].isSpace()) --end;
    reasoning_begin_ = begin < end ? begin : -1;
    reasoning_end_ = begin < end ? end : -1;
    decided_ = close + int(kClose.size());
    state_ = State::AfterClose;
}

void ThinkSplitter::advance(QStringView text, bool complete) {
    restarted_ = false;
    complete_ = complete;
    const int n = int(text.size());
    for (;;) {
        switch (state_) {
            case State::Start: {
                int i = 0;
                while (i < n && text[i].isSpace()) ++i;
                const QStringView rest = text.sliced(i);
                if (rest.startsWith(kOpen)) {
                    open_end_ = i + int(kOpen.size());
                    decided_ = open_end_;
                    state_ = State::Thinking;
                } else if (!complete && kOpen.startsWith(rest)) {
                    return;  // "", "<", "<th": may still become "<think>"
                } else {
                    state_ = State::Maybe;
                }
                break;
            }
            case State::Maybe: {
                const qsizetype close = text.indexOf(kClose, decided_);
                if (close >= 0) {
                    restarted_ = decided_ > 0;
                    open_end_ = 0;
                    closeAt(text, int(close));
                    break;
                }
                decided_ = complete ? n : n - partialTagAtEnd(text, kClose, decided_);
                return;
            }
            case State::Thinking: {
                const qsizetype close = text.indexOf(kClose, decided_);
                if (close >= 0) {
                    closeAt(text, int(close));
                    break;
                }
                if (complete) {
                    // Stopped mid-thought: a partial tag is reasoning text after all, trailing
                    // whitespace stays hidden.
                    noteReasoning(text, decided_, n);
                    if (reasoning_begin_ >= 0) {
                        int end = n;
                        while (end > reasoning_begin_ && text[end - 1].isSpace()) --end;
                        reasoning_end_ = end;
                    }
                    decided_ = n;
                    return;
                }
                int end = n - partialTagAtEnd(text, kClose, decided_);
                while (end > decided_ && text[end - 1].isSpace()) --end;
                noteReasoning(text, decided_, end);
                decided_ = end;
                return;
            }
            case State::AfterClose: {
                int i = decided_;
                while (i < n && text[i].isSpace()) ++i;
                decided_ = n;
                if (i < n) {
                    answer_begin_ = i;
                    state_ = State::Answer;
                }
                return;
            }
            case State::Answer:
                decided_ = n;
                return;
        }
    }
}

}  // namespace tokenscope::ui
