#ifndef CCURLLOADER_H
#define CCURLLOADER_H

#include <stddef.h>

/// libcurl, loaded with dlopen the first time a request is made: linked,
/// it and its ~30 libraries (TLS, Kerberos, LDAP…) would load at every
/// start, ~5 ms, for the runs that make no request. No libcurl headers
/// are needed to build: the constants below are libcurl's ABI values
/// (stable since they were introduced; 7.68 or later is needed for
/// curl_multi_poll and curl_multi_wakeup, 7.85 for the protocol lists).

/// Loads libcurl and calls curl_global_init (once; later calls return the
/// first result): 0 on success, else -1 with the reason in `err`.
int tasker_curl_load(char *err, size_t len);

/// Write, header and read callbacks share this shape.
typedef size_t (*tasker_curl_data_fn)(char *data, size_t size, size_t count, void *context);

void *tasker_curl_easy_init(void);
void tasker_curl_easy_cleanup(void *easy);
int tasker_curl_easy_setopt_long(void *easy, int option, long value);
int tasker_curl_easy_setopt_pointer(void *easy, int option, const void *value);
int tasker_curl_easy_setopt_offset(void *easy, int option, long long value);
int tasker_curl_easy_setopt_function(void *easy, int option, tasker_curl_data_fn fn);
int tasker_curl_easy_getinfo_long(void *easy, int info, long *value);
int tasker_curl_easy_getinfo_string(void *easy, int info, const char **value);
const char *tasker_curl_easy_strerror(int code);

void *tasker_curl_multi_init(void);
int tasker_curl_multi_cleanup(void *multi);
int tasker_curl_multi_setopt_long(void *multi, int option, long value);
int tasker_curl_multi_add_handle(void *multi, void *easy);
int tasker_curl_multi_remove_handle(void *multi, void *easy);
int tasker_curl_multi_perform(void *multi, int *running);
/// Waits for activity on the transfers' sockets, `timeout_ms` at most, or
/// until `tasker_curl_multi_wakeup` (from any thread).
int tasker_curl_multi_poll(void *multi, int timeout_ms);
int tasker_curl_multi_wakeup(void *multi);
/// The next finished transfer: 1 with its handle and CURLcode, 0 if none.
int tasker_curl_multi_next_done(void *multi, void **easy, int *result);

void *tasker_curl_slist_append(void *list, const char *string);
void tasker_curl_slist_free_all(void *list);

enum {
    TASKER_CURL_GLOBAL_ALL = 3,
    TASKER_CURLMSG_DONE = 1,
    TASKER_CURL_ERROR_SIZE = 256,

    TASKER_CURLOPT_WRITEDATA = 10001,
    TASKER_CURLOPT_URL = 10002,
    TASKER_CURLOPT_ERRORBUFFER = 10010,
    TASKER_CURLOPT_WRITEFUNCTION = 20011,
    TASKER_CURLOPT_READFUNCTION = 20012,
    TASKER_CURLOPT_READDATA = 10009,
    TASKER_CURLOPT_POSTFIELDS = 10015,
    TASKER_CURLOPT_USERAGENT = 10018,
    TASKER_CURLOPT_HTTPHEADER = 10023,
    TASKER_CURLOPT_HEADERDATA = 10029,
    TASKER_CURLOPT_CUSTOMREQUEST = 10036,
    TASKER_CURLOPT_CAINFO = 10065,
    TASKER_CURLOPT_CAPATH = 10097,
    TASKER_CURLOPT_NOPROGRESS = 43,
    TASKER_CURLOPT_NOBODY = 44,
    TASKER_CURLOPT_UPLOAD = 46,
    TASKER_CURLOPT_POST = 47,
    TASKER_CURLOPT_FOLLOWLOCATION = 52,
    TASKER_CURLOPT_HEADERFUNCTION = 20079,
    TASKER_CURLOPT_NOSIGNAL = 99,
    TASKER_CURLOPT_ACCEPT_ENCODING = 10102,
    TASKER_CURLOPT_PRIVATE = 10103,
    TASKER_CURLOPT_INFILESIZE_LARGE = 30115,
    TASKER_CURLOPT_POSTFIELDSIZE_LARGE = 30120,
    TASKER_CURLOPT_COPYPOSTFIELDS = 10165,
    TASKER_CURLOPT_TIMEOUT_MS = 155,
    TASKER_CURLOPT_CONNECTTIMEOUT_MS = 156,
    TASKER_CURLOPT_TCP_KEEPALIVE = 213,
    TASKER_CURLOPT_PROTOCOLS_STR = 10318,
    TASKER_CURLOPT_REDIR_PROTOCOLS_STR = 10319,

    TASKER_CURLINFO_EFFECTIVE_URL = 0x100000 + 1,
    TASKER_CURLINFO_RESPONSE_CODE = 0x200000 + 2,
    TASKER_CURLINFO_REDIRECT_URL = 0x100000 + 31,

    TASKER_CURLMOPT_MAXCONNECTS = 6,
    TASKER_CURLMOPT_MAX_HOST_CONNECTIONS = 7,
    TASKER_CURLMOPT_MAX_TOTAL_CONNECTIONS = 13,

    TASKER_CURLE_OK = 0,
    TASKER_CURLE_UNSUPPORTED_PROTOCOL = 1,
    TASKER_CURLE_URL_MALFORMAT = 3,
    TASKER_CURLE_COULDNT_RESOLVE_PROXY = 5,
    TASKER_CURLE_COULDNT_RESOLVE_HOST = 6,
    TASKER_CURLE_COULDNT_CONNECT = 7,
    TASKER_CURLE_WEIRD_SERVER_REPLY = 8,
    TASKER_CURLE_HTTP2 = 16,
    TASKER_CURLE_PARTIAL_FILE = 18,
    TASKER_CURLE_WRITE_ERROR = 23,
    TASKER_CURLE_READ_ERROR = 26,
    TASKER_CURLE_OUT_OF_MEMORY = 27,
    TASKER_CURLE_OPERATION_TIMEDOUT = 28,
    TASKER_CURLE_SSL_CONNECT_ERROR = 35,
    TASKER_CURLE_ABORTED_BY_CALLBACK = 42,
    TASKER_CURLE_TOO_MANY_REDIRECTS = 47,
    TASKER_CURLE_GOT_NOTHING = 52,
    TASKER_CURLE_SSL_ENGINE_NOTFOUND = 53,
    TASKER_CURLE_SEND_ERROR = 55,
    TASKER_CURLE_RECV_ERROR = 56,
    TASKER_CURLE_SSL_CERTPROBLEM = 58,
    TASKER_CURLE_SSL_CIPHER = 59,
    TASKER_CURLE_PEER_FAILED_VERIFICATION = 60,
    TASKER_CURLE_BAD_CONTENT_ENCODING = 61,
    TASKER_CURLE_SSL_CACERT_BADFILE = 77,
    TASKER_CURLE_SSL_SHUTDOWN_FAILED = 80,
    TASKER_CURLE_SSL_CRL_BADFILE = 82,
    TASKER_CURLE_SSL_ISSUER_ERROR = 83,
    TASKER_CURLE_HTTP2_STREAM = 92,
    TASKER_CURLE_SSL_PINNEDPUBKEYNOTMATCH = 90,
    TASKER_CURLE_SSL_INVALIDCERTSTATUS = 91,
    TASKER_CURLE_SSL_CLIENTCERT = 98,
};

#endif
