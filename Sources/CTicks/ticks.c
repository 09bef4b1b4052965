#include "CTicks.h"
#include <stdio.h>
#include <string.h>

int tasker_ticks_are_counter(void) {
#if defined(__x86_64__)
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (!f) return 0;
    char name[32] = {0};
    int ok = fgets(name, sizeof name, f) != NULL && strcmp(name, "tsc\n") == 0;
    fclose(f);
    return ok;
#elif defined(__aarch64__)
    return 1;
#else
    return 0;
#endif
}
