// SQLite 3 from the system (Debian: libsqlite3-dev), found through pkg-config sqlite3.
#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast macro Swift cannot import: "copy the bytes now".
static inline sqlite3_destructor_type tasker_sqlite_transient(void) { return SQLITE_TRANSIENT; }

static inline int tasker_sqlite_no_checkpoint_on_close(sqlite3 *db) { return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)0); }
