// A test process that hangs must fail, and say where, long before CI's
// time runs out: a hung run otherwise shows nothing (output to a pipe is
// block-buffered, so even the lines of tests that passed are lost).
//
// As the test binary loads, stdout and stderr become line-buffered, and a
// thread sleeps for TASKER_TEST_WATCHDOG seconds (default 1200; 0 turns it
// off). If the process is still there then (a test that never returns, or
// an exit handler that hangs), it prints the process tree and every
// thread's stack (gdb, where installed), kills every process it started,
// and exits with status 3.
#include "TestWatchdog.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned watchdog_seconds = 0;

unsigned tasker_test_watchdog_seconds(void) { return watchdog_seconds; }

/// SIGKILL to every descendant of this process (servers and programs the
/// tests started, which would otherwise outlive it and could hold the
/// output pipe of whoever runs the tests). Parents are read from /proc.
static void kill_descendants(void) {
    enum { MAX = 32768 };
    static int pids[MAX], parents[MAX], doomed[MAX];
    int count = 0;
    DIR *proc = opendir("/proc");
    if (!proc) return;
    struct dirent *entry;
    while ((entry = readdir(proc)) && count < MAX) {
        int pid = atoi(entry->d_name);
        if (pid <= 0) continue;
        char path[64], text[512];
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t n = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[n] = 0;
        char *close = strrchr(text, ')');
        int ppid = 0;
        if (!close || sscanf(close + 1, " %*c %d", &ppid) != 1) continue;
        pids[count] = pid;
        parents[count] = ppid;
        doomed[count] = 0;
        count++;
    }
    closedir(proc);
    // a process is doomed when its parent is this process or a doomed one
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < count; i++) {
            if (doomed[i]) continue;
            int parent = parents[i], hit = parent == getpid();
            for (int j = 0; j < count && !hit; j++) hit = doomed[j] && pids[j] == parent;
            if (hit) { doomed[i] = 1; changed = 1; }
        }
    }
    for (int i = 0; i < count; i++) if (doomed[i]) kill(pids[i], SIGKILL);
}

static void *watch(void *arg) {
    (void)arg;
    struct timespec left = {(time_t)watchdog_seconds, 0};
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {}
    fprintf(stderr, "\n[test watchdog] the test process (pid %d) is still running after %u s: "
            "a test or an exit handler hangs. This process's threads, then every process:\n",
            (int)getpid(), watchdog_seconds);
    fflush(stderr);
    // The processes last: a log shortened in the middle keeps its end, and
    // the commands still running there (a `tasker run` of a test's
    // pipeline, an ssh and its remote command) name the test that hangs.
    char command[640];
    snprintf(command, sizeof command,
             "command -v gdb >/dev/null && timeout 120 gdb -p %d -batch -nx "
             "-ex 'set pagination off' -ex 'thread apply all bt 25' 1>&2 2>/dev/null </dev/null; "
             "echo '[test watchdog] every process:' 1>&2; "
             "ps --deselect --ppid 2 --pid 2 -o pid,ppid,etime,stat,wchan:16,args --forest 1>&2; "
             "echo \"[test watchdog] load: $(cat /proc/loadavg); free: $(df -h /tmp | tail -1)\" 1>&2",
             (int)getpid());
    (void)system(command);
    kill_descendants();
    fprintf(stderr, "[test watchdog] ending the test process and what it started\n");
    fflush(stderr);
    _exit(3);
    return NULL;
}

__attribute__((constructor)) static void start_watchdog(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    setvbuf(stderr, NULL, _IOLBF, 0);
    const char *text = getenv("TASKER_TEST_WATCHDOG");
    long seconds = text && *text ? strtol(text, NULL, 10) : 1200;
    if (seconds <= 0) return;
    watchdog_seconds = (unsigned)seconds;
    // gdb, started by this process's shell, may attach to it
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    // no signal of the tests' is delivered to this thread
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_create(&thread, &attr, watch, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}
