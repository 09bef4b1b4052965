// libpq's declarations (Debian: libpq-dev). The library itself is not
// linked: CPostgresLoader defines these functions and loads libpq at the
// first connection (see tasker_pq_load).
#include <postgresql/libpq-fe.h>
#include <stddef.h>

/// Loads libpq (once; later calls return the first result): 0 on success,
/// else -1 with the reason in `err`.
int tasker_pq_load(char *err, size_t len);
