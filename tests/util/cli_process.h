#pragma once
// Running a program (the CLI under test) as a user would: arguments, optional stdin, a time
// limit, and everything it printed. Shared by the CLI suites.
#include <QByteArray>
#include <QProcess>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

namespace tokenscope::test {

struct CliResult {
    int exit_code = -1;    // -1 when it crashed or timed out
    bool crashed = false;  // did not exit normally (a signal, or killed after the time limit)
    QString out, err;
};

// Runs `program` with `args`, writes `input` to its stdin and closes it; kills it after
// `timeout_ms` (then err is "timed out").
inline CliResult run_process(
    const QString& program, const QStringList& args, const QByteArray& input = {},
    int timeout_ms = 120000,
    const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment()) {
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(program, args);
    if (!input.isEmpty()) p.write(input);
    p.closeWriteChannel();
    CliResult r;
    if (!p.waitForFinished(timeout_ms)) {
        p.kill();
        p.waitForFinished();
        r.err = "timed out";
        r.crashed = true;
        return r;
    }
    r.crashed = p.exitStatus() != QProcess::NormalExit;
    r.exit_code = r.crashed ? -1 : p.exitCode();
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}

}  // namespace tokenscope::test
