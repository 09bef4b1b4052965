#include "CPostgresLoader.h"
#include "../CPostgres/shim.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define PQ_FUNCTIONS(X) \
    X(PQclear) X(PQcmdTuples) X(PQconnectdbParams) X(PQconsumeInput) X(PQerrorMessage) X(PQescapeIdentifier) \
    X(PQfinish) X(PQfreemem) X(PQgetisnull) X(PQgetvalue) X(PQnfields) X(PQfname) \
    X(PQnotifies) X(PQntuples) X(PQresultErrorField) X(PQresultErrorMessage) X(PQresultStatus) \
    X(PQsetNoticeProcessor) X(PQsocket) X(PQstatus) X(PQlibVersion) \
    X(PQsendQuery) X(PQsendQueryParams) X(PQsendQueryPrepared) X(PQsendPrepare) X(PQisBusy) X(PQgetResult) \
    X(PQflush) X(PQsetnonblocking)

// Each slot has the type of libpq's own function (checked by the compiler
// against libpq-fe.h).
#define SLOT(name) __typeof__(name) *name;
static struct { PQ_FUNCTIONS(SLOT) } real;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[512];

static void load(void) {
    void *h = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(failure, sizeof failure, "%s", e ? e : "libpq.so.5 not found");
        return;
    }
#define RESOLVE(name) \
    if (!(real.name = (__typeof__(name) *)dlsym(h, #name))) { \
        snprintf(failure, sizeof failure, "libpq has no %s", #name); \
        return; \
    }
    PQ_FUNCTIONS(RESOLVE)
}

int tasker_pq_load(char *err, size_t len) {
    pthread_once(&once, load);
    if (!failure[0]) return 0;
    if (err && len) snprintf(err, len, "%s", failure);
    return -1;
}

// Every caller loads first (PGConnection does, before connecting); a call
// without it is a bug in tasker, not the user's.
static void need(void) {
    if (tasker_pq_load(NULL, 0) == 0) return;
    fprintf(stderr, "tasker: libpq called before it was loaded: %s\n", failure);
    abort();
}

void PQclear(PGresult *r) { need(); real.PQclear(r); }
char *PQcmdTuples(PGresult *r) { need(); return real.PQcmdTuples(r); }
PGconn *PQconnectdbParams(const char *const *keywords, const char *const *values, int expand_dbname) {
    need();
    return real.PQconnectdbParams(keywords, values, expand_dbname);
}
int PQconsumeInput(PGconn *c) { need(); return real.PQconsumeInput(c); }
char *PQerrorMessage(const PGconn *c) { need(); return real.PQerrorMessage(c); }
char *PQescapeIdentifier(PGconn *c, const char *s, size_t n) { need(); return real.PQescapeIdentifier(c, s, n); }
void PQfinish(PGconn *c) { need(); real.PQfinish(c); }
void PQfreemem(void *p) { need(); real.PQfreemem(p); }
int PQgetisnull(const PGresult *r, int row, int col) { need(); return real.PQgetisnull(r, row, col); }
char *PQgetvalue(const PGresult *r, int row, int col) { need(); return real.PQgetvalue(r, row, col); }
int PQnfields(const PGresult *r) { need(); return real.PQnfields(r); }
char *PQfname(const PGresult *r, int column) { need(); return real.PQfname(r, column); }
PGnotify *PQnotifies(PGconn *c) { need(); return real.PQnotifies(c); }
int PQntuples(const PGresult *r) { need(); return real.PQntuples(r); }
char *PQresultErrorField(const PGresult *r, int field) { need(); return real.PQresultErrorField(r, field); }
char *PQresultErrorMessage(const PGresult *r) { need(); return real.PQresultErrorMessage(r); }
ExecStatusType PQresultStatus(const PGresult *r) { need(); return real.PQresultStatus(r); }
PQnoticeProcessor PQsetNoticeProcessor(PGconn *c, PQnoticeProcessor p, void *arg) {
    need();
    return real.PQsetNoticeProcessor(c, p, arg);
}
int PQsocket(const PGconn *c) { need(); return real.PQsocket(c); }
ConnStatusType PQstatus(const PGconn *c) { need(); return real.PQstatus(c); }
int PQlibVersion(void) { need(); return real.PQlibVersion(); }

int PQsendQuery(PGconn *c, const char *q) { need(); return real.PQsendQuery(c, q); }
int PQsendQueryParams(PGconn *c, const char *q, int n, const Oid *types, const char *const *values,
                      const int *lengths, const int *formats, int resultFormat) {
    need();
    return real.PQsendQueryParams(c, q, n, types, values, lengths, formats, resultFormat);
}
int PQsendQueryPrepared(PGconn *c, const char *name, int n, const char *const *values, const int *lengths,
                        const int *formats, int resultFormat) {
    need();
    return real.PQsendQueryPrepared(c, name, n, values, lengths, formats, resultFormat);
}
int PQsendPrepare(PGconn *c, const char *name, const char *query, int n, const Oid *types) {
    need();
    return real.PQsendPrepare(c, name, query, n, types);
}
int PQisBusy(PGconn *c) { need(); return real.PQisBusy(c); }
PGresult *PQgetResult(PGconn *c) { need(); return real.PQgetResult(c); }
int PQflush(PGconn *c) { need(); return real.PQflush(c); }
int PQsetnonblocking(PGconn *c, int arg) { need(); return real.PQsetnonblocking(c, arg); }
