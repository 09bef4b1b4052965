// SQLite 3 from the system (Debian: libsqlite3-dev), found through pkg-config sqlite3.
#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast macro Swift cannot import: "copy the bytes now".
static inline sqlite3_destructor_type tasker_sqlite_transient(void) { return SQLITE_TRANSIENT; }

static inline int tasker_sqlite_no_checkpoint_on_close(sqlite3 *db) { return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)0); }

// Keeps the number of pages in the connection's WAL after each commit in
// *pages. Installing it turns SQLite's own checkpoint after a commit off
// (that is a WAL hook too): the caller checkpoints when it chooses.
static int tasker_sqlite_wal_pages_hook(void *pages, sqlite3 *db, const char *name, int n) {
    (void)db; (void)name;
    *(int *)pages = n;
    return SQLITE_OK;
}
static inline void tasker_sqlite_count_wal_pages(sqlite3 *db, int *pages) { sqlite3_wal_hook(db, tasker_sqlite_wal_pages_hook, pages); }
