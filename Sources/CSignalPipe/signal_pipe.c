#define _GNU_SOURCE

#include "CSignalPipe.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static int pipe_fds[2] = {-1, -1};
static volatile sig_atomic_t caught[65];

int tasker_signal_pipe_open(void) {
    if (pipe_fds[0] >= 0) return pipe_fds[0];
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    // A flood of signals while the reader is busy drops bytes instead of
    // blocking the handler (the reader acts on each signal once anyway).
    if (fcntl(fds[1], F_SETFL, O_NONBLOCK) != 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    pipe_fds[1] = fds[1];
    pipe_fds[0] = fds[0];
    return fds[0];
}

static void on_signal(int sig) {
    int saved = errno;
    if (sig > 0 && sig < 65) caught[sig] = 1;
    unsigned char byte = (unsigned char)sig;
    ssize_t n = write(pipe_fds[1], &byte, 1);
    (void)n;
    errno = saved;
}

int tasker_signal_pipe_catch(int sig) {
    if (pipe_fds[1] < 0) {
        errno = EBADF;
        return -1;
    }
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    return sigaction(sig, &action, NULL);
}

int tasker_signal_pipe_caught(int sig) { return sig > 0 && sig < 65 ? caught[sig] : 0; }

void tasker_signal_pipe_name_reader(void) { prctl(PR_SET_NAME, "tasker-signals", 0, 0, 0); }
