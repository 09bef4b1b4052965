#include "CMallocTuning.h"

#include <malloc.h>

void tasker_tune_malloc(size_t trim_threshold, size_t top_pad, size_t mmap_threshold) {
    mallopt(M_TRIM_THRESHOLD, (int)trim_threshold);
    mallopt(M_TOP_PAD, (int)top_pad);
    mallopt(M_MMAP_THRESHOLD, (int)mmap_threshold);
}
