#pragma once
// Waiting for the user to stop a long-running command (serve) with Ctrl+C or a termination
// request, portably: POSIX blocks SIGINT/SIGTERM in every thread and sigwaits for them; Windows
// has no such signals for console programs and uses a console control handler instead.
namespace tokenscope::cli {

// Call before starting any thread, so the threads inherit the blocked signals (POSIX).
void block_shutdown_signals();
// Returns once the user asked to stop; the text says how ("interrupted", "terminated").
const char* wait_for_shutdown_signal();

}  // namespace tokenscope::cli
