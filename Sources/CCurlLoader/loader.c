// libcurl, loaded at the first request (see CCurlLoader.h). Types are
// spelled as the ABI sees them (handles as pointers, enums and CURLcode as
// int), so no libcurl headers are needed to build.
#include "CCurlLoader.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#define CURL_FUNCTIONS(X) \
    X(curl_global_init) X(curl_easy_init) X(curl_easy_cleanup) X(curl_easy_setopt) \
    X(curl_easy_getinfo) X(curl_easy_strerror) X(curl_multi_init) X(curl_multi_cleanup) \
    X(curl_multi_setopt) X(curl_multi_add_handle) X(curl_multi_remove_handle) \
    X(curl_multi_perform) X(curl_multi_poll) X(curl_multi_wakeup) X(curl_multi_info_read) \
    X(curl_slist_append) X(curl_slist_free_all)

#define SLOT(name) void *name;
static struct { CURL_FUNCTIONS(SLOT) } real;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded;         // tried to the end: `failure` says whether it worked
static char failure[512];

static void load(void) {
    // The sonames of Debian's libcurl4 (OpenSSL) and libcurl3-gnutls.
    const char *names[] = {"libcurl.so.4", "libcurl-gnutls.so.4"};
    void *h = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        // Not final: the process may have been out of descriptors or
        // memory for the moment; the next request tries again.
        const char *e = dlerror();
        snprintf(failure, sizeof failure, "%s", e ? e : "libcurl.so.4 not found");
        return;
    }
    loaded = 1;
#define RESOLVE(name) \
    if (!(real.name = dlsym(h, #name))) { \
        snprintf(failure, sizeof failure, "libcurl has no %s (7.68 or later is needed)", #name); \
        return; \
    }
    CURL_FUNCTIONS(RESOLVE)
    // Once, before any handle, while no other thread uses libcurl.
    int code = ((int (*)(long))real.curl_global_init)(TASKER_CURL_GLOBAL_ALL);
    if (code != 0) snprintf(failure, sizeof failure, "curl_global_init failed (%d)", code);
}

int tasker_curl_load(char *err, size_t len) {
    pthread_mutex_lock(&lock);
    if (!loaded) {
        failure[0] = 0;
        load();
    }
    int ok = !failure[0];
    if (!ok && err && len) snprintf(err, len, "%s", failure);
    pthread_mutex_unlock(&lock);
    return ok ? 0 : -1;
}

typedef void *ptr;

// The variadic setters and getters take exactly one more argument; each
// wrapper passes it with its real type.
int tasker_curl_easy_setopt_long(ptr h, int option, long value) {
    return ((int (*)(ptr, int, ...))real.curl_easy_setopt)(h, option, value);
}
int tasker_curl_easy_setopt_pointer(ptr h, int option, const void *value) {
    return ((int (*)(ptr, int, ...))real.curl_easy_setopt)(h, option, value);
}
int tasker_curl_easy_setopt_offset(ptr h, int option, long long value) {
    return ((int (*)(ptr, int, ...))real.curl_easy_setopt)(h, option, value);
}
int tasker_curl_easy_setopt_function(ptr h, int option, tasker_curl_data_fn fn) {
    return ((int (*)(ptr, int, ...))real.curl_easy_setopt)(h, option, fn);
}
int tasker_curl_easy_getinfo_long(ptr h, int info, long *value) {
    return ((int (*)(ptr, int, ...))real.curl_easy_getinfo)(h, info, value);
}
int tasker_curl_easy_getinfo_string(ptr h, int info, const char **value) {
    return ((int (*)(ptr, int, ...))real.curl_easy_getinfo)(h, info, value);
}
int tasker_curl_multi_setopt_long(ptr m, int option, long value) {
    return ((int (*)(ptr, int, ...))real.curl_multi_setopt)(m, option, value);
}

ptr tasker_curl_easy_init(void) { return ((ptr (*)(void))real.curl_easy_init)(); }
void tasker_curl_easy_cleanup(ptr h) { ((void (*)(ptr))real.curl_easy_cleanup)(h); }
const char *tasker_curl_easy_strerror(int code) { return ((const char *(*)(int))real.curl_easy_strerror)(code); }

ptr tasker_curl_multi_init(void) { return ((ptr (*)(void))real.curl_multi_init)(); }
int tasker_curl_multi_cleanup(ptr m) { return ((int (*)(ptr))real.curl_multi_cleanup)(m); }
int tasker_curl_multi_add_handle(ptr m, ptr h) { return ((int (*)(ptr, ptr))real.curl_multi_add_handle)(m, h); }
int tasker_curl_multi_remove_handle(ptr m, ptr h) { return ((int (*)(ptr, ptr))real.curl_multi_remove_handle)(m, h); }
int tasker_curl_multi_perform(ptr m, int *running) { return ((int (*)(ptr, int *))real.curl_multi_perform)(m, running); }
int tasker_curl_multi_poll(ptr m, int timeout_ms) {
    return ((int (*)(ptr, ptr, unsigned, int, int *))real.curl_multi_poll)(m, NULL, 0, timeout_ms, NULL);
}
int tasker_curl_multi_wakeup(ptr m) { return ((int (*)(ptr))real.curl_multi_wakeup)(m); }

// CURLMsg: {int msg; CURL *easy_handle; union {void *whatever; CURLcode result;} data;}
struct tasker_curl_message {
    int msg;
    ptr easy;
    union {
        ptr whatever;
        int result;
    } data;
};

int tasker_curl_multi_next_done(ptr m, ptr *easy, int *result) {
    int left = 0;
    struct tasker_curl_message *msg;
    while ((msg = ((struct tasker_curl_message * (*)(ptr, int *)) real.curl_multi_info_read)(m, &left))) {
        if (msg->msg != TASKER_CURLMSG_DONE) continue;
        *easy = msg->easy;
        *result = msg->data.result;
        return 1;
    }
    return 0;
}

ptr tasker_curl_slist_append(ptr list, const char *s) {
    return ((ptr (*)(ptr, const char *))real.curl_slist_append)(list, s);
}
void tasker_curl_slist_free_all(ptr list) { ((void (*)(ptr))real.curl_slist_free_all)(list); }
