#ifndef CSIGNALPIPE_H
#define CSIGNALPIPE_H

/// Signals as bytes on a pipe: the handler only writes the signal's number
/// (async-signal-safe), and a thread reading the pipe does the work: no
/// signal is lost, whichever thread the kernel interrupts.

/// Creates the pipe once; returns its read end, or -1 with errno set.
/// Not thread-safe: call it under a lock (or from one thread) first.
int tasker_signal_pipe_open(void);

/// Sends `sig` to the pipe from now on (SA_RESTART); 0, or -1 with errno.
int tasker_signal_pipe_catch(int sig);

/// Whether `sig` was caught since `tasker_signal_pipe_catch` (set by the
/// handler itself: true even before the reading thread has seen it).
int tasker_signal_pipe_caught(int sig);

/// Names the calling thread "tasker-signals" (as `ps -L` and /proc show it).
void tasker_signal_pipe_name_reader(void);

#endif
