// Starting other programs: always from an argument vector, never through a
// shell, so no text from a config, run directory or sweep file is ever
// interpreted as a command. The sweep's workers, `sbatch` and the report's
// gnuplot all start here.
#pragma once

#include <string>
#include <vector>

namespace altgrad::host {

// Starts `argv` (argv[0] searched on PATH when it has no '/'), standard input
// /dev/null, standard output and error to `output_fd` (-1: inherited); when
// `die_with_parent`, the child gets SIGTERM if this process dies; `keep_fd`
// (-1: none), a close-on-exec descriptor, stays open in the child; with
// `own_group` the child leads a process group of its own, so kill(-pid, ...)
// reaches whatever it starts in turn (a wrapper script's children). SIGINT and
// SIGTERM are at their defaults in the child. Returns its pid; throws
// host::error naming argv[0] when it cannot be started (not found, not
// executable): the failed exec is reported back, not guessed from status 127.
int spawn_process(const std::vector<std::string>& argv, int output_fd, bool die_with_parent, int keep_fd = -1,
                  bool own_group = false);

// How a finished child ended, from waitpid's status: its exit status, or
// 128 + the signal that killed it (the shell's convention).
int exit_code(int wait_status);

}  // namespace altgrad::host
