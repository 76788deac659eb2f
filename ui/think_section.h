#pragma once
// Where a thinking model's reasoning lies in its reply, found while the reply streams in.
//
// Thinking models (Qwen 3, DeepSeek-R1 distills) write their reasoning first, between <think>
// and </think>. The chat template may already have written "<think>" into the prompt, so a reply
// can also start with the reasoning itself and contain only "</think>"; Qwen 3 with thinking off
// replies with an empty "<think>\n\n</think>\n\n" first.
//
// The splitter gives every character of the reply a part: Tag (the tags and the whitespace
// around them, which the chat view does not show), Thinking or Answer. Text arrives token by
// token and a tag may be split over tokens ("<th" + "ink>"), so the end of the text can be
// undecided: a possible start of a tag and, inside the reasoning, the whitespace before it
// (hidden if the tag follows). Once decided, a character's part never changes, with one
// exception: a reply without an opening tag is Answer until a "</think>" shows that it was
// reasoning. restarted() reports that, and the caller lays the reply out again.
//
// Only the first "</think>" counts: after it everything is Answer, so an answer that talks about
// the tags is not folded away. The price of accepting a reply without "<think>" is that a reply
// of a non-thinking model that writes "</think>" folds the text before it; the chat view cannot
// know whether the prompt opened a think section.
#include <QStringView>

namespace tokenscope::ui {

class ThinkSplitter {
  public:
    enum class Part { Tag, Thinking, Answer };

    // enabled = false: everything is Answer (user and system messages never fold).
    explicit ThinkSplitter(bool enabled = true);

    // `text` is the whole reply so far: what the previous call saw plus what arrived since.
    // complete: nothing more will come (the reply ended), so nothing is left undecided.
    void advance(QStringView text, bool complete);

    // Characters [0, decided()) have a part; partAt() is only meaningful for those.
    int decided() const { return decided_; }
    Part partAt(int offset) const;
    bool complete() const { return complete_; }
    // True when the last advance() found that text it had already decided as Answer is
    // reasoning (the reply had no "<think>"): everything decided before must be laid out again.
    bool restarted() const { return restarted_; }

    // A think section exists (from "<think>", or up to "</think>" when the prompt opened it).
    bool hasSection() const { return open_end_ >= 0; }
    // The section holds some reasoning; an empty "<think>\n\n</think>" holds none.
    bool hasReasoning() const { return reasoning_begin_ >= 0; }
    // Offset right after "<think>" (0 when the prompt opened the section), or -1.
    int sectionBegin() const { return open_end_; }
    // Offset of "</think>", or -1 while the section is still open (or there is none).
    int closeTagBegin() const { return close_begin_; }

  private:
    enum class State { Start, Maybe, Thinking, AfterClose, Answer };
    void closeAt(QStringView text, int close);
    void noteReasoning(QStringView text, int from, int to);

    State state_ = State::Start;
    bool complete_ = false;
    bool restarted_ = false;
    int decided_ = 0;
    int open_end_ = -1;
    int reasoning_begin_ = -1;  // first non-space character of the reasoning
    int reasoning_end_ = -1;    // after its last one; -1 while the section is open
    int close_begin_ = -1;
    int answer_begin_ = -1;  // first non-space character after "</think>"
};

}  // namespace tokenscope::ui
