#ifndef C_MALLOC_TUNING_H
#define C_MALLOC_TUNING_H

#include <stddef.h>

/// Sets glibc malloc's trim threshold, top pad and mmap threshold, in
/// bytes (mallopt: its header is not reachable from Swift).
void tasker_tune_malloc(size_t trim_threshold, size_t top_pad, size_t mmap_threshold);

#endif
