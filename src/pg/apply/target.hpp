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
#include <string_view>
#include <unordered_map>
#include <vector>

extern "C" {
#include "access/attnum.h"
#include "utils/relcache.h"
}

namespace cdc::pg {

struct Column {
	std::string name;
	AttrNumber attnum = 0;
	Oid type = InvalidOid;
	int32 typmod = -1;
	bool generated = false;
	// GENERATED ALWAYS AS IDENTITY: inserts name it with OVERRIDING SYSTEM
	// VALUE, updates never assign it (PostgreSQL refuses any value but
	// DEFAULT there); PostgreSQL's own apply writes it without the rewriter
	bool identity_always = false;
	bool not_null = false;
	ColumnType ctype;
	FmgrInfo *in_fn = nullptr; // palloc'd in the call's memory context
	Oid ioparam = InvalidOid;
	FmgrInfo *out_fn = nullptr;
	std::string eq_op; // "OPERATOR(schema.=)": the type's default equality, schema-qualified (key and non-key identity columns)
	Oid array_type = InvalidOid; // for set-based batch writes (unnest of one array per column)
	bool deterministic = true;   // its collation (if any) is deterministic: equal means equal text
	// Not a built-in type (a domain, a composite, an extension's type): its
	// input may run user code (a domain's CHECK), so on the worker path it
	// runs as the role the target's statements run as (image.cpp).
	bool user_type = false;
	// A domain: its input function also checks NULL (NOT NULL, a CHECK that
	// NULL fails), so a null value goes through it too (image.cpp).
	bool domain = false;
	int16 typlen = 0;
	bool typbyval = false;
	char typalign = 'i';
	// How an outbox payload renders the column as jsonb (outbox.cpp, PayloadJsonKind),
	// worked out on first use: -1 not yet.
	mutable int8_t json_kind = -1;
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
	// ordering = 'stream': written only by one ordered stream, decided by
	// the target's high-water mark (docs/semantics.md, "Stream ordering")
	bool stream_ordered = false;
	// source_name: the only source whose events may write the target
	// (nullopt: any), also when the caller names the target explicitly
	// (docs/security.md, "What granting a target means").
	std::optional<std::string> source_name;
	DecodeOptions decode;
};

struct Target {
	Oid relid = InvalidOid;
	std::string qualified; // quoted schema.table, for SQL text
	// The table's own rows in SELECT, UPDATE, DELETE and TRUNCATE: "ONLY
	// schema.table" for a plain table, whose inheritance children's rows of
	// the same key are not the change's (a change names one table, at the
	// source and in PostgreSQL's own apply: test/t/069_worker_inheritance.pl),
	// `qualified` for a partitioned one (ONLY would reach none of its
	// partitions).
	std::string own_rows;
	std::string display;   // schema.table, for messages and outbox
	Oid owner = InvalidOid; // relowner: the role the worker applies as (docs/security.md)
	std::vector<Column> columns;
	std::unordered_map<std::string, int> by_name; // hashed: looked up per value of every change
	// The index into `columns` of the column named `name`, -1 if none.
	// `guess` is where the caller expects it (the value's position in its
	// image: pgoutput sends the columns in table order, and Debezium's
	// fields follow the source's column order; an image read from jsonb
	// has jsonb's key order, jsonb_order): checked with one or two string
	// comparisons before the hash look-up.
	int ColumnOf(std::string_view name, size_t guess) const
	{
		if (guess < columns.size() && columns[guess].name == name)
			return int(guess);
		if (guess < jsonb_order.size() && columns[size_t(jsonb_order[guess])].name == name)
			return jsonb_order[guess];
		auto f = by_name.find(std::string(name));
		return f == by_name.end() ? -1 : f->second;
	}
	// Indexes into `columns` in jsonb's key order (shorter names first,
	// then bytewise): where member i of an image read from jsonb most likely
	// is (the guess of ColumnOf for DecodeViewImage).
	std::vector<int> jsonb_order;
	std::vector<int> key; // indexes into columns
	int version_col = -1;
	bool independent_rows = false; // nothing relates one row to another (IndependentRowsPg)
	bool upsert_fires_insert_triggers = false;  // BEFORE INSERT row or INSERT statement triggers, or partitioned (UpsertFiresInsertTriggersPg)
	bool has_identity_always = false;        // some column is GENERATED ALWAYS AS IDENTITY
	bool has_nonkey_identity_always = false; // and one of them is not a key column
	Mapping mapping;
	ModeConfig modes; // state, history or handler (pg/modes.hpp)
	std::optional<Barrier> barrier;
	// Entity ordering only: the stream marks left by an earlier stream
	// ordering (cdc.stream_mark, source id -> version), the implicit record
	// of every key without one.  Empty for most targets.
	std::map<int32_t, Version> stream_marks;
	// Stream ordering: the worker found no two subscriptions feeding the
	// target with different publications (ApplyEngine::Mark,
	// CheckStreamScope); checked once per cached target, not per change.
	mutable bool stream_scope_checked = false;
	// The members of the target's partition tree whose relcache invalidation
	// can mean a changed tree (its partitioned ancestors and its partitioned
	// descendants: ATTACH, DETACH, CREATE TABLE ... PARTITION OF and DROP of
	// a partition invalidate the parent), read with the metadata: such an
	// invalidation drops this entry too.  Leaves are not kept: their ANALYZE
	// would drop it for nothing.
	// `tree_mapped`: a member of the tree, leaves included, that has a mapping
	// (InvalidOid: none), and its quoted name; LoadTarget refuses the target
	// then (55000).
	// `tree_mapped_below`: one of its partitions (any level) that has a
	// mapping, and its quoted name: the worker's unmapped targets are
	// refused only for those (CheckPartitionTree).
	std::vector<Oid> tree;
	Oid tree_mapped = InvalidOid;
	std::string tree_mapped_name;
	Oid tree_mapped_below = InvalidOid;
	std::string tree_mapped_below_name;
	// The outbox payload's plan (outbox.cpp, PayloadFromImage), worked out on
	// first use: the columns in jsonb key order (shorter names first, then
	// bytewise, as jsonb stores an object's keys) and whether every column
	// has a kind the payload is built for without to_jsonb().
	struct PayloadPlan {
		const void *built_for = nullptr; // the Target it was worked out for (names point into its columns): a copy works it out again
		bool fast = false;
		std::vector<int> order;            // indexes into columns, in key order
		std::vector<int8_t> kinds;         // per position of `order`
		std::vector<const char *> names;   // per position of `order` (the columns' names)
		std::vector<int> name_lens;
		std::vector<FmgrInfo *> outs;
		// Whether a table outbox may store the payload straight from the
		// image (outbox.cpp, StoredPayloadFromImage): `fast`, at least one
		// column, and names that fit a cdc.outbox_source entry; then
		// `stored_keys` are those names, in key order.
		bool storable = false;
		std::vector<std::string> stored_keys;
		// The key columns (indexes into columns) in jsonb key order: the
		// order StoredEntityKey prints the outbox's entity key in.
		std::vector<int> key_order;
	};
	mutable PayloadPlan payload_plan;
};

// Raises 42501 unless `role` may SELECT, INSERT, UPDATE and DELETE on table
// `relid` (what the engine's statements need; INSERT ... ON CONFLICT DO
// UPDATE ... RETURNING needs SELECT too).  `display` names the table;
// `worker`: the message names the role (the worker's error record keeps no
// detail).
void CheckPrivileges(Oid relid, const std::string &display, Oid role, bool worker);

// Whether partitioned table `relid` has a partition (any level) whose owner
// is neither `role` nor a member of it: that owner's code (triggers,
// defaults, index expressions and predicates) would run as `role`.  Sets
// *partition and *owner to the first such; locks every partition ACCESS
// SHARE.  False for any other relation.  PostgreSQL regime (review h3: the
// worker, cdc.audit and cdc.resync refuse such a table, 42501).
bool ForeignOwnedPartitionPg(Oid relid, Oid role, Oid *partition, Oid *owner);

// What no path may apply to or map, for the engine (CheckBeforeLock) and
// cdc._write_mapping (register) alike: Internal, a system catalog (or its
// TOAST table) or a table of the schema cdc (the bookkeeping, subscriptions
// and mappings); Temporary, a temporary table; Unlogged, an unlogged table
// or a partitioned table with an unlogged partition at any level, with
// *unlogged that table (relid or the partition; InvalidOid for every other
// class).  Usable otherwise, also when relid does not exist (each caller
// reports that its own way).  Cheap and without locks: an OID range test,
// one syscache look-up (and the cdc schema's OID) and, for a partitioned
// table, its partitions read without locks (one attached meanwhile is seen
// by the next call).  PostgreSQL regime; no errors of its own.
enum class TargetClass { Usable, Internal, Temporary, Unlogged };
TargetClass ClassifyTargetPg(Oid relid, Oid *unlogged);

// The valid, immediate unique index, neither partial nor on expressions,
// whose key columns are exactly `cols` (any order): the index ON CONFLICT
// (cols) infers.  InvalidOid if none.  PostgreSQL regime.
Oid UniqueIndexOnPg(Relation rel, const AttrNumber *cols, int ncols);

// The key columns of `rel`'s primary key, in index order, into cols[]
// (room for INDEX_MAX_KEYS); returns how many, 0 without a primary key.
// PostgreSQL regime.
int PrimaryKeyColumnsPg(Relation rel, AttrNumber *cols);

// Key columns whose equal values can print different key texts.  Entity
// records name an entity by its key's text (KeyTextPg), so two values the
// destination holds as one row ('a' and 'A' under citext or a
// case-insensitive collation, jsonb 1.0 and 1) would be two entities: a delete of one does not stop a late change of
// the other, and a row is lost or comes back (found by a fresh-user run).
// A column is safe when its values are compared by image equality (the
// btree operator class's BTEQUALIMAGE_PROC under the collation, as nbtree's
// deduplication asks; an operator class without one is trusted unless the
// collation is nondeterministic or the type is jsonb or citext) or are
// numbers, which KeyTextPg normalises; arrays,
// ranges, multiranges and composites by their parts; a domain as its base
// type; char(n) as padded, an unconstrained bpchar never (trailing blanks
// are insignificant);
// interval is accepted although '1 day' and '24:00:00' are equal (a known
// limit, docs/semantics.md).
// Checked for each column's own type and collation and for the collation
// and operator class of each unique index on exactly the key columns.
// Returns the position in `attrs` of the first column found, with *by_index
// the index that makes it ambiguous (InvalidOid: its type or collation), or
// -1.  The engine refuses such a key on entity-ordered targets (a
// stream-ordered one keeps no entity records); cdc.register_mapping warns
// (cdc._key_ambiguity).  PostgreSQL regime.
int AmbiguousKeyColumnPg(Oid relid, const AttrNumber *attrs, int nattrs, Oid *by_index);

// The message for such a column (palloc'd; `by_index`: the index's name, or
// null), and the 0A000 ERROR with it, its detail and hint.  PostgreSQL regime.
char *AmbiguousKeyMessagePg(const char *column, const char *display, const char *type_name, const char *by_index);
void AmbiguousKeyErrorPg(const char *column, const char *display, const char *type_name, const char *by_index);
constexpr const char *kAmbiguousKeyDetail =
	"Entity records name an entity by its key's text: two texts of one row would be two entities, and a delete of one "
	"would not stop a late change of the other.";
constexpr const char *kAmbiguousKeyHint =
	"Key the mapping by columns whose equal values print alike (for example a text column the source fills with "
	"lower(email), with a unique index, as key_columns; not a generated column, which cannot be a key); a "
	"subscription's target may instead be stream-ordered (cdc.set_ordering), which keeps no entity records.";

// The family of a column type, as decoding and key texts read it: its base
// type's (a domain counts as its base type); *elem is set to the element
// type for arrays.  PostgreSQL regime.
ColumnType::Family FamilyPg(Oid type, Oid *elem);

} // namespace cdc::pg
