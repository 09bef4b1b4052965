#ifndef CPOSTGRESLOADER_H
#define CPOSTGRESLOADER_H
// Defines the libpq functions tasker calls (declared by CPostgres), each
// forwarding to libpq's own, looked up when tasker_pq_load first runs.
// Linking libpq would load it and ~30 libraries (TLS, Kerberos, LDAP…) at
// every start, ~5 ms, for the runs that never connect.
#endif
