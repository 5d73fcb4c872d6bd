// Included first by every pure C++ source file (src/core/*.cpp).
//
// Pure files (envelope parsing, version logic, value decoding) must never see
// PostgreSQL headers: they are linked into the GoogleTest binary, which has no
// server symbols, and PostgreSQL's c.h macros (Min, Max, gettext, ...) break
// C++ libraries.  The PostgreSQL glue lives in src/pg/.
#pragma once

#ifdef POSTGRES_H
#error "src/core is pure C++: it must not include postgres.h (move the code to src/pg/)"
#endif
