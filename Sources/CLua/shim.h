// Lua 5.4's public headers, found through pkg-config lua5.4.
#include <lua.h>
#include <lualib.h>
#include <lauxlib.h>
