// Every PostgreSQL-version difference the glue depends on lives here
// (STYLE rule 12).  Included right after postgres.h by guard.hpp.
#pragma once

extern "C" {
#include "postgres.h"
}

// PostgreSQL 16 made PGDLLEXPORT mark symbols visible on ELF platforms and
// builds extensions with -fvisibility=hidden.  We build with
// -fvisibility=hidden on every version (nothing but the entry points is
// exported), so on older servers PGDLLEXPORT must say the same.
#if PG_VERSION_NUM < 160000 && defined(__GNUC__) && !defined(_WIN32)
#undef PGDLLEXPORT
#define PGDLLEXPORT __attribute__((visibility("default")))
#endif
