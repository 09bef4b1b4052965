// Process helpers Swift cannot reach: pidfd_open (Swift cannot call the
// variadic syscall(2)) and glibc's GNU posix_spawn file actions.
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <spawn.h>
#include <stdatomic.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

int tasker_pidfd_open(int pid) {
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    return -1;
#endif
}

int tasker_spawn_closefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

int tasker_spawn_chdir(posix_spawn_file_actions_t *actions, const char *dir) {
    return posix_spawn_file_actions_addchdir_np(actions, dir);
}

int tasker_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int tasker_epoll_ctl(int ep, int op, int fd, unsigned events, unsigned long long token) {
    struct epoll_event e = {.events = events, .data.u64 = token};
    int cop = op == TASKER_EPOLL_ADD ? EPOLL_CTL_ADD : op == TASKER_EPOLL_MOD ? EPOLL_CTL_MOD : EPOLL_CTL_DEL;
    return epoll_ctl(ep, cop, fd, &e);
}

int tasker_epoll_wait(int ep, unsigned long long *tokens, unsigned *events, int max, long long timeout_ns) {
    // epoll_pwait2 (Linux 5.11) waits to the nanosecond: the event loop
    // waits here for its next timer. Older kernels round up to the next ms.
    static atomic_int no_pwait2;
    struct epoll_event buf[64];
    if (max > 64) max = 64;
    int n = -1;
    int tried = 0;
    if (timeout_ns > 0 && !atomic_load_explicit(&no_pwait2, memory_order_relaxed)) {
        struct timespec ts = {(time_t)(timeout_ns / 1000000000LL), (long)(timeout_ns % 1000000000LL)};
        n = epoll_pwait2(ep, buf, max, &ts, NULL);
        tried = 1;
        if (n < 0 && errno == ENOSYS) {
            atomic_store_explicit(&no_pwait2, 1, memory_order_relaxed);
            tried = 0;
        }
    }
    if (!tried) {
        // rounded up without an overflow (a timer a century away is near LLONG_MAX)
        long long ms = timeout_ns < 0 ? -1 : timeout_ns / 1000000 + (timeout_ns % 1000000 != 0);
        n = epoll_wait(ep, buf, max, ms > 0x7fffffff ? 0x7fffffff : (int)ms);
    }
    for (int i = 0; i < n; i++) {
        tokens[i] = buf[i].data.u64;
        events[i] = buf[i].events;
    }
    return n;
}
