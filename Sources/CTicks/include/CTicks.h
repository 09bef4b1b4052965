#ifndef CTICKS_H
#define CTICKS_H

#include <stdint.h>
#include <time.h>

/// The CPU's own counter where the kernel trusts it as a clock (see
/// `tasker_ticks_are_counter`), else CLOCK_MONOTONIC in nanoseconds. A
/// counter read costs a few nanoseconds; clock_gettime about 25 here.
static inline uint64_t tasker_ticks(int counter) {
#if defined(__x86_64__)
    if (counter) {
        uint32_t lo, hi;
        __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
        return ((uint64_t)hi << 32) | lo;
    }
#elif defined(__aarch64__)
    if (counter) {
        uint64_t v;
        __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
        return v;
    }
#endif
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/// Whether `tasker_ticks(1)` reads a counter that runs at a constant rate
/// on every CPU: on x86-64 only when the kernel's clocksource is the TSC
/// (it checked that), on arm64 always (the architected timer).
int tasker_ticks_are_counter(void);

/// Asks for the cache line at p ahead of a write there (the identity
/// counts' table outgrows the cache: each new key was a wait for memory).
static inline void tasker_prefetch(const void *p) { __builtin_prefetch(p, 1, 3); }

#endif
