// Process helpers Swift cannot reach: pidfd_open (Swift cannot call the
// variadic syscall(2)) and glibc's GNU posix_spawn file actions.
#define _GNU_SOURCE
#include "internal.h"

#include <spawn.h>
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
