#include "conversation_export.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

namespace tokenscope::app {

namespace {

QString tr(const char* text) {
    return QCoreApplication::translate("tokenscope::app::ConversationExport", text);
}

const QString kFormat = QStringLiteral("tokenscope.conversations");
constexpr int kVersion = 1;

QString heading(Role role) {
    switch (role) {
        case Role::System:
            return tr("System");
        case Role::User:
            return tr("You");
        case Role::Assistant:
            return tr("Assistant");
    }
    return {};
}

QJsonArray candidates_json(const QList<TraceCandidate>& list) {
    QJsonArray out;
    for (const auto& c : list)
        out.append(QJsonObject{{"id", c.id},
                               {"piece", c.piece},
                               {"probability", double(c.probability)},
                               {"logit", double(c.logit)}});
    return out;
}

QJsonObject trace_token_json(const TraceToken& t) {
    return {{"id", t.id},
            {"text", t.text},
            {"probability", double(t.probability)},
            {"logprob", double(t.logprob)},
            {"origin", int(t.origin)},
            {"before", candidates_json(t.before)},
            {"after", candidates_json(t.after)}};
}

// A reply's fields, for the message on show and for its other versions alike.
QJsonObject reply_json(const ReplyVersion& r) {
    QJsonObject o{{"content", r.content},
                  {"complete", r.complete},
                  {"token_count", r.token_count},
                  {"finish_reason", r.finish_reason},
                  {"decode_tokens_per_s", r.decode_tokens_per_s},
                  {"ttft_ms", r.ttft_ms}};
    if (r.ordinal > 0) o["version"] = r.ordinal;
    QJsonArray trace;
    for (const TraceToken& t : r.trace) trace.append(trace_token_json(t));
    if (!trace.isEmpty()) o["trace"] = trace;
    return o;
}

QJsonObject conversation_json(ConversationStore& store, qint64 id) {
    const auto c = store.conversation(id);
    if (!c) return {};
    QJsonArray messages;
    for (const Message& m : store.messages(id)) {
        QJsonObject o;
        if (m.role == Role::Assistant) {
            ReplyVersion shown;
            copy_reply_fields(m, shown);
            shown.ordinal = m.version;
            shown.trace = store.token_trace(m.id);
            o = reply_json(shown);
            if (m.versions > 0) {
                // Alternative replies: the others as they were kept ("version" says which one
                // this is).
                QJsonArray others;
                for (const ReplyVersion& v : store.reply_versions(id, m.position))
                    others.append(reply_json(v));
                o["other_versions"] = others;
            }
        } else {
            o = {{"content", m.content}, {"complete", m.complete}, {"token_count", m.token_count}};
        }
        o["role"] = role_name(m.role);
        messages.append(o);
    }
    return {{"title", c->title},
            {"system_prompt", c->system_prompt},
            {"model", c->model_path},
            {"created_at", c->created_at.toString(Qt::ISODateWithMs)},
            {"updated_at", c->updated_at.toString(Qt::ISODateWithMs)},
            {"messages", messages}};
}

// Reads the file into plain structs, checking every field; the first problem is reported with
// its place in the file.
struct Imported {
    Conversation conversation;
    struct Entry {
        Message message;
        QList<TraceToken> trace;
        QList<ReplyVersion> others;  // alternative replies
    };
    QList<Entry> messages;
};

class Reader {
  public:
    QString error;

    bool string(const QJsonObject& o, const char* key, const QString& at, QString& out,
                bool required) {
        const QJsonValue v = o.value(QLatin1String(key));
        if (v.isUndefined() && !required) return true;
        if (!v.isString()) return fail(at + "." + key, tr("must be a string"));
        out = v.toString();
        return true;
    }
    bool number(const QJsonObject& o, const char* key, const QString& at, double& out) {
        const QJsonValue v = o.value(QLatin1String(key));
        if (v.isUndefined()) return true;
        if (!v.isDouble()) return fail(at + "." + key, tr("must be a number"));
        out = v.toDouble();
        return true;
    }
    bool candidates(const QJsonValue& v, const QString& at, QList<TraceCandidate>& out) {
        if (v.isUndefined()) return true;
        if (!v.isArray()) return fail(at, tr("must be a list"));
        const QJsonArray list = v.toArray();
        for (int i = 0; i < list.size(); ++i) {
            const QString here = QStringLiteral("%1[%2]").arg(at).arg(i);
            if (!list[i].isObject()) return fail(here, tr("must be an object"));
            const QJsonObject o = list[i].toObject();
            TraceCandidate c;
            double id = 0, p = 0, logit = 0;
            if (!number(o, "id", here, id) || !string(o, "piece", here, c.piece, false) ||
                !number(o, "probability", here, p) || !number(o, "logit", here, logit))
                return false;
            c.id = qint32(id);
            c.probability = float(p);
            c.logit = float(logit);
            out.push_back(c);
        }
        return true;
    }
    bool message(const QJsonValue& v, const QString& at, Imported::Entry& out) {
        if (!v.isObject()) return fail(at, tr("must be an object"));
        const QJsonObject o = v.toObject();
        QString role;
        if (!string(o, "role", at, role, true)) return false;
        const auto r = role_from_name(role);
        if (!r) return fail(at + ".role", tr("'%1' is not system, user or assistant").arg(role));
        out.message.role = *r;
        ReplyVersion shown;
        if (!reply(o, at, shown)) return false;
        copy_reply_fields(shown, out.message);
        out.message.version = shown.ordinal;
        out.trace = shown.trace;
        const QJsonValue others = o.value("other_versions");
        if (others.isUndefined()) return true;
        if (!others.isArray()) return fail(at + ".other_versions", tr("must be a list"));
        const QJsonArray versions = others.toArray();
        for (int i = 0; i < versions.size(); ++i) {
            const QString here = QStringLiteral("%1.other_versions[%2]").arg(at).arg(i);
            if (!versions[i].isObject()) return fail(here, tr("must be an object"));
            ReplyVersion kept;
            if (!reply(versions[i].toObject(), here, kept)) return false;
            if (kept.ordinal < 1) return fail(here + ".version", tr("must be 1 or more"));
            out.others.push_back(kept);
        }
        return true;
    }
    // The fields reply_json() writes: content (required), complete, token_count, finish_reason,
    // speeds, version and trace.
    bool reply(const QJsonObject& o, const QString& at, ReplyVersion& out) {
        if (!string(o, "content", at, out.content, true)) return false;
        const QJsonValue complete = o.value("complete");
        if (!complete.isUndefined() && !complete.isBool())
            return fail(at + ".complete", tr("must be true or false"));
        out.complete = complete.toBool(true);
        double tokens = 0, version = 0;
        if (!number(o, "token_count", at, tokens) ||
            !string(o, "finish_reason", at, out.finish_reason, false) ||
            !number(o, "decode_tokens_per_s", at, out.decode_tokens_per_s) ||
            !number(o, "ttft_ms", at, out.ttft_ms) || !number(o, "version", at, version) ||
            !trace(o.value("trace"), at + ".trace", out.trace))
            return false;
        out.token_count = int(tokens);
        out.ordinal = int(version);
        return true;
    }
    bool trace(const QJsonValue& trace, const QString& at, QList<TraceToken>& out) {
        if (trace.isUndefined()) return true;
        if (!trace.isArray()) return fail(at, tr("must be a list"));
        const QJsonArray list = trace.toArray();
        for (int i = 0; i < list.size(); ++i) {
            const QString here = QStringLiteral("%1[%2]").arg(at).arg(i);
            if (!list[i].isObject()) return fail(here, tr("must be an object"));
            const QJsonObject t = list[i].toObject();
            TraceToken token;
            double id = 0, p = 0, lp = 0, origin = 0;
            if (!number(t, "id", here, id) || !string(t, "text", here, token.text, false) ||
                !number(t, "probability", here, p) || !number(t, "logprob", here, lp) ||
                !number(t, "origin", here, origin) ||
                !candidates(t.value("before"), here + ".before", token.before) ||
                !candidates(t.value("after"), here + ".after", token.after))
                return false;
            token.id = qint32(id);
            token.probability = float(p);
            token.logprob = float(lp);
            token.origin = quint8(origin);
            out.push_back(token);
        }
        return true;
    }
    bool conversation(const QJsonValue& v, const QString& at, Imported& out) {
        if (!v.isObject()) return fail(at, tr("must be an object"));
        const QJsonObject o = v.toObject();
        if (!string(o, "title", at, out.conversation.title, true) ||
            !string(o, "system_prompt", at, out.conversation.system_prompt, false) ||
            !string(o, "model", at, out.conversation.model_path, false))
            return false;
        const QJsonValue messages = o.value("messages");
        if (!messages.isArray()) return fail(at + ".messages", tr("must be a list"));
        const QJsonArray list = messages.toArray();
        for (int i = 0; i < list.size(); ++i) {
            Imported::Entry e;
            if (!message(list[i], QStringLiteral("%1.messages[%2]").arg(at).arg(i), e))
                return false;
            out.messages.push_back(e);
        }
        return true;
    }

  private:
    bool fail(const QString& at, const QString& why) {
        error = at + ": " + why;
        return false;
    }
};

}  // namespace

QString conversation_markdown(ConversationStore& store, qint64 conversation_id) {
    const auto c = store.conversation(conversation_id);
    if (!c) return {};
    QString out = QStringLiteral("# %1\n\n").arg(c->title);
    QStringList facts;
    if (!c->model_path.isEmpty()) facts << tr("Model: %1").arg(c->model_path);
    facts << tr("Exported from tokenscope on %1")
                 .arg(QDateTime::currentDateTimeUtc().toString(Qt::ISODate));
    out += QStringLiteral("*%1*\n\n").arg(facts.join(QStringLiteral(" · ")));
    if (!c->system_prompt.isEmpty())
        out += QStringLiteral("**%1:** %2\n\n").arg(heading(Role::System), c->system_prompt);
    for (const Message& m : store.messages(conversation_id)) {
        out += QStringLiteral("## %1\n\n%2\n\n").arg(heading(m.role), m.content.trimmed());
        if (m.role != Role::Assistant) continue;
        QStringList stats;
        if (m.token_count > 0) stats << tr("%1 tokens").arg(m.token_count);
        if (m.decode_tokens_per_s > 0)
            stats << tr("%1 tok/s").arg(m.decode_tokens_per_s, 0, 'f', 1);
        if (!m.complete) stats << tr("stopped before the end");
        if (!stats.isEmpty()) out += QStringLiteral("*%1*\n\n").arg(stats.join(" · "));
    }
    return out;
}

QByteArray conversations_json(ConversationStore& store, const QList<qint64>& conversation_ids) {
    QJsonArray list;
    for (qint64 id : conversation_ids) {
        QJsonObject c = conversation_json(store, id);
        if (!c.isEmpty()) list.append(c);
    }
    const QJsonObject root{{"format", kFormat},
                           {"version", kVersion},
                           {"exported_at", QDateTime::currentDateTimeUtc().toString(Qt::ISODate)},
                           {"conversations", list}};
    return QJsonDocument(root).toJson(QJsonDocument::Indented);
}

ImportResult import_conversations_json(ConversationStore& store, const QByteArray& json) {
    ImportResult result;
    QJsonParseError parse;
    const QJsonDocument doc = QJsonDocument::fromJson(json, &parse);
    if (parse.error != QJsonParseError::NoError) {
        result.error = tr("not JSON: %1 at byte %2").arg(parse.errorString()).arg(parse.offset);
        return result;
    }
    const QJsonObject root = doc.object();
    if (!doc.isObject() || root.value("format").toString() != kFormat) {
        result.error = tr("not a tokenscope export: 'format' is not '%1'").arg(kFormat);
        return result;
    }
    if (root.value("version").toInt(-1) != kVersion) {
        result.error = tr("version %1 of the format; this tokenscope reads version %2")
                           .arg(root.value("version").toVariant().toString())
                           .arg(kVersion);
        return result;
    }
    if (!root.value("conversations").isArray()) {
        result.error = tr("conversations: must be a list");
        return result;
    }
    Reader reader;
    QList<Imported> imported;
    const QJsonArray list = root.value("conversations").toArray();
    for (int i = 0; i < list.size(); ++i) {
        Imported c;
        if (!reader.conversation(list[i], QStringLiteral("conversations[%1]").arg(i), c)) {
            result.error = reader.error;
            return result;
        }
        imported.push_back(c);
    }
    // Everything read: now written, conversation by conversation.
    for (const Imported& c : imported) {
        const qint64 id = store.create_conversation(
            c.conversation.title, c.conversation.system_prompt, c.conversation.model_path);
        for (int position = 0; position < c.messages.size(); ++position) {
            const Imported::Entry& e = c.messages[position];
            const Message& m = e.message;
            const qint64 message_id =
                store.append_message(id, m.role, m.content, m.complete, m.token_count);
            if (m.role == Role::Assistant)
                store.set_reply_stats(
                    message_id, {m.finish_reason, m.token_count, m.decode_tokens_per_s, m.ttft_ms});
            if (!e.trace.isEmpty()) store.set_token_trace(message_id, e.trace);
            if (m.version > 0) store.set_reply_version(message_id, m.version);
            for (const ReplyVersion& v : e.others) store.add_reply_version(id, position, v);
        }
        result.conversations.push_back(id);
    }
    return result;
}

}  // namespace tokenscope::app
