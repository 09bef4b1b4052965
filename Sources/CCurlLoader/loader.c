// Lazily loaded libcurl: the functions FoundationNetworking calls, each
// forwarding to libcurl's own (see CCurlLoader.h). Types are spelled as
// the ABI sees them (handles as pointers, enums and CURLcode as int), so
// no libcurl headers are needed to build.
#include "CCurlLoader.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CURL_FUNCTIONS(X) \
    X(curl_easy_cleanup) X(curl_easy_getinfo) X(curl_easy_init) X(curl_easy_pause) \
    X(curl_easy_setopt) X(curl_easy_strerror) X(curl_free) X(curl_global_init) \
    X(curl_multi_add_handle) X(curl_multi_assign) X(curl_multi_cleanup) X(curl_multi_info_read) \
    X(curl_multi_init) X(curl_multi_remove_handle) X(curl_multi_setopt) X(curl_multi_socket_action) \
    X(curl_slist_append) X(curl_slist_free_all) X(curl_url) X(curl_url_get) X(curl_url_set) \
    X(curl_version) X(curl_version_info)

#define SLOT(name) void *name;
static struct { CURL_FUNCTIONS(SLOT) } real;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[512];

static void load(void) {
    // The soname Debian's libcurl4 (OpenSSL flavour) and libcurl3-gnutls
    // ship; FoundationNetworking was built against the first.
    const char *names[] = {"libcurl.so.4", "libcurl-gnutls.so.4"};
    void *h = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(failure, sizeof failure, "%s", e ? e : "libcurl.so.4 not found");
        return;
    }
#define RESOLVE(name) \
    if (!(real.name = dlsym(h, #name))) { \
        snprintf(failure, sizeof failure, "libcurl has no %s", #name); \
        return; \
    }
    CURL_FUNCTIONS(RESOLVE)
}

int tasker_curl_load(char *err, size_t len) {
    pthread_once(&once, load);
    if (!failure[0]) return 0;
    if (err && len) snprintf(err, len, "%s", failure);
    return -1;
}

// Reached only when FoundationNetworking calls libcurl without the Swift
// side having loaded it first (it always does): nothing sensible remains.
static void need(void) {
    char err[512];
    if (tasker_curl_load(err, sizeof err) == 0) return;
    fprintf(stderr, "tasker: HTTP needs libcurl (Debian: libcurl4): %s\n", err);
    abort();
}

typedef void *ptr;

ptr curl_easy_init(void) { need(); return ((ptr (*)(void))real.curl_easy_init)(); }
void curl_easy_cleanup(ptr h) { need(); ((void (*)(ptr))real.curl_easy_cleanup)(h); }
int curl_easy_pause(ptr h, int bitmask) { need(); return ((int (*)(ptr, int))real.curl_easy_pause)(h, bitmask); }
const char *curl_easy_strerror(int code) { need(); return ((const char *(*)(int))real.curl_easy_strerror)(code); }
void curl_free(ptr p) { need(); ((void (*)(ptr))real.curl_free)(p); }
int curl_global_init(long flags) { need(); return ((int (*)(long))real.curl_global_init)(flags); }

// The variadic ones take exactly one more argument: a long, a curl_off_t,
// or a pointer (data or function), which the ABIs tasker builds for pass
// alike in one integer register or stack slot.
#define FORWARD_ONE_MORE(name) \
    int name(ptr handle, int what, ...) { \
        need(); \
        va_list ap; \
        va_start(ap, what); \
        ptr arg = va_arg(ap, ptr); \
        va_end(ap); \
        return ((int (*)(ptr, int, ...))real.name)(handle, what, arg); \
    }
FORWARD_ONE_MORE(curl_easy_setopt)
FORWARD_ONE_MORE(curl_easy_getinfo)
FORWARD_ONE_MORE(curl_multi_setopt)

ptr curl_multi_init(void) { need(); return ((ptr (*)(void))real.curl_multi_init)(); }
int curl_multi_cleanup(ptr m) { need(); return ((int (*)(ptr))real.curl_multi_cleanup)(m); }
int curl_multi_add_handle(ptr m, ptr h) { need(); return ((int (*)(ptr, ptr))real.curl_multi_add_handle)(m, h); }
int curl_multi_remove_handle(ptr m, ptr h) { need(); return ((int (*)(ptr, ptr))real.curl_multi_remove_handle)(m, h); }
int curl_multi_assign(ptr m, int socket, ptr p) { need(); return ((int (*)(ptr, int, ptr))real.curl_multi_assign)(m, socket, p); }
ptr curl_multi_info_read(ptr m, int *left) { need(); return ((ptr (*)(ptr, int *))real.curl_multi_info_read)(m, left); }
int curl_multi_socket_action(ptr m, int socket, int events, int *running) {
    need();
    return ((int (*)(ptr, int, int, int *))real.curl_multi_socket_action)(m, socket, events, running);
}

ptr curl_slist_append(ptr list, const char *s) { need(); return ((ptr (*)(ptr, const char *))real.curl_slist_append)(list, s); }
void curl_slist_free_all(ptr list) { need(); ((void (*)(ptr))real.curl_slist_free_all)(list); }

ptr curl_url(void) { need(); return ((ptr (*)(void))real.curl_url)(); }
int curl_url_get(ptr u, int what, char **part, unsigned flags) {
    need();
    return ((int (*)(ptr, int, char **, unsigned))real.curl_url_get)(u, what, part, flags);
}
int curl_url_set(ptr u, int what, const char *part, unsigned flags) {
    need();
    return ((int (*)(ptr, int, const char *, unsigned))real.curl_url_set)(u, what, part, flags);
}

char *curl_version(void) { need(); return ((char *(*)(void))real.curl_version)(); }
ptr curl_version_info(int age) { need(); return ((ptr (*)(int))real.curl_version_info)(age); }
