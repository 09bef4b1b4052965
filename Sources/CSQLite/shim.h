// SQLite 3 from the system (Debian: libsqlite3-dev), found through pkg-config sqlite3.
#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast macro Swift cannot import: "copy the bytes now".
static inline sqlite3_destructor_type tasker_sqlite_transient(void) { return SQLITE_TRANSIENT; }
