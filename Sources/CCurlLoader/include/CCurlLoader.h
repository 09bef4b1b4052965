#ifndef CCURLLOADER_H
#define CCURLLOADER_H

#include <stddef.h>

/// Loads libcurl (once; later calls return the first result): 0 on
/// success, else -1 with dlerror's text in `err`.
///
/// FoundationNetworking calls libcurl; linking libcurl would load it and
/// its ~30 libraries (TLS, Kerberos, LDAP…) at every start, ~5 ms, for the
/// runs that make no request. This target defines the libcurl functions
/// FoundationNetworking uses instead: each forwards to the real one, which
/// is looked up the first time any is called.
int tasker_curl_load(char *err, size_t len);

#endif
