#ifndef TEST_WATCHDOG_H
#define TEST_WATCHDOG_H

/// Seconds the test process may run before the watchdog ends it (0 before
/// the watchdog has started). The watchdog starts when the test binary
/// loads: see watchdog.c.
unsigned tasker_test_watchdog_seconds(void);

#endif
