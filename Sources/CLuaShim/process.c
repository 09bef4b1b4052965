// Process helpers Swift cannot reach: pidfd_open (Swift cannot call the
// variadic syscall(2)) and glibc's GNU posix_spawn file actions.
#define _GNU_SOURCE
#include "internal.h"

#include <spawn.h>
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

int tasker_epoll_wait(int ep, unsigned long long *tokens, unsigned *events, int max, int timeout_ms) {
    struct epoll_event buf[64];
    if (max > 64) max = 64;
    int n = epoll_wait(ep, buf, max, timeout_ms);
    for (int i = 0; i < n; i++) {
        tokens[i] = buf[i].data.u64;
        events[i] = buf[i].events;
    }
    return n;
}
