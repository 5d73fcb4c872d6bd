// Target metadata (the counterpart of PostgreSQL's logical/relation.c):
// what the engine knows about a destination table (columns and their types'
// I/O functions, the entity key, the cdc.mapping row with its mode, the
// truncate barrier).  target.cpp loads it (ApplyEngine::LoadTarget) into a
// backend cache that relcache and pg_proc invalidation callbacks keep
// current, and resolves source tables to targets (docs/internals.md,
// "Target metadata cache").
//
// Internal to src/pg/apply/.  The structs are plain C++ data; the FmgrInfo
// they point to lives in the cache's memory context, never freed by C++.
#pragma once

#include "core/decode.hpp"
#include "core/version.hpp"
#include "pg/apply/engine.hpp"
#include "pg/apply/modes.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

extern "C" {
#include "access/attnum.h"
}

namespace cdc::pg {

struct Column {
	std::string name;
	AttrNumber attnum = 0;
	Oid type = InvalidOid;
	int32 typmod = -1;
	bool generated = false;
	bool not_null = false;
	ColumnType ctype;
	FmgrInfo *in_fn = nullptr; // palloc'd in the call's memory context
	Oid ioparam = InvalidOid;
	FmgrInfo *out_fn = nullptr;
	std::string eq_op; // "OPERATOR(schema.=)": the type's default equality, schema-qualified
	Oid array_type = InvalidOid; // for set-based batch writes (unnest of one array per column)
	bool deterministic = true;   // its collation (if any) is deterministic: equal means equal text
	int16 typlen = 0;
	bool typbyval = false;
	char typalign = 'i';
};

struct Mapping {
	bool registered = false;
	std::vector<std::string> key_columns;
	std::string version_column;
	int64_t epoch = 0;
	bool outbox = false;
	bool outbox_message = false; // outbox_via 'message': logical decoding messages instead of cdc.outbox rows
	std::optional<std::string> topic;
	bool truncate_ignore = false;
	bool conflict_error = false;
	DecodeOptions decode;
};

struct Target {
	Oid relid = InvalidOid;
	std::string qualified; // quoted schema.table, for SQL text
	std::string display;   // schema.table, for messages and outbox
	std::vector<Column> columns;
	std::map<std::string, int> by_name;
	std::vector<int> key; // indexes into columns
	int version_col = -1;
	bool independent_rows = false; // nothing relates one row to another (IndependentRowsPg)
	Mapping mapping;
	ModeConfig modes; // state, history or handler (pg/modes.hpp)
	std::optional<Barrier> barrier;
};

// Raises 42501 unless the current user may SELECT, INSERT, UPDATE and DELETE
// on the target (what the engine's statements need).
void CheckPrivileges(const Target &t);

} // namespace cdc::pg
