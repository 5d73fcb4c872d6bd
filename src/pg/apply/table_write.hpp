// Target rows written through the executor and the table access method,
// as PostgreSQL's own apply worker writes them (worker.c,
// execReplication.c), instead of an SQL statement: for the set-based
// writes of a batch segment (segment.cpp), whose targets have independent
// rows (IndependentRowsPg: a plain table, no triggers, rules, row-level
// security, CHECK constraints or unique index besides the key's), so an
// INSERT ... ON CONFLICT DO UPDATE and "find the row by its key index,
// update it, else insert" give the same rows.  docs/internals.md, "Writes
// without SQL", says why this is our own code.
//
// Internal to src/pg/apply/.  C++ regime.
#pragma once

#include "pg/apply/image.hpp"
#include "pg/apply/target.hpp"
#include "pg/spi.hpp"

#include <vector>

extern "C" {
#include "nodes/execnodes.h"
}

namespace cdc::pg {

// What an executor write without a plan needs (PostgreSQL regime): an
// EState with a one-entry range table for `rel` (requiredPerms `perms`,
// for error reports), its ResultRelInfo with the indexes open, and the
// output command id.  BeginExecWritePg switches to the EState's memory
// context; EndExecWritePg closes the indexes, frees the EState, switches
// back and makes the writes visible to later commands
// (CommandCounterIncrement).  The relation stays open (the caller's).
// `speculative`: the indexes are opened for INSERT ... ON CONFLICT
// (ExecOpenIndices: the unique indexes' equality operators, which the
// conflict pre-check uses).
struct ExecWrite {
	EState *estate = nullptr;
	ResultRelInfo *rri = nullptr;
	MemoryContext caller_cxt = nullptr;
};
void BeginExecWritePg(Relation rel, AclMode perms, ExecWrite *w, bool speculative = false);
void EndExecWritePg(ExecWrite *w);

// INSERT ... ON CONFLICT DO NOTHING of the row in `slot` with the unique
// index `arbiter` as the conflict target (a partial one only where the row
// satisfies its predicate, as the statement infers it), by
// the executor's speculative insertion protocol (nodeModifyTable.c,
// ExecInsert).  A pre-check on the key index waits for an uncommitted row
// with the key and reports a committed one (then: false, nothing
// inserted).  Otherwise the row goes in marked with a speculative token;
// its index entries are inserted without raising a duplicate error; a
// conflict found there (a concurrent transaction inserted the key after
// the pre-check) kills our row and the whole thing starts over, now
// waiting for that transaction; else the insertion is confirmed and true
// returned.  Sessions that meanwhile found our row wait on the token, not
// on our transaction's end, so two speculative inserters cannot deadlock.
// Needs the indexes opened for speculative insertion (BeginExecWritePg,
// speculative = true).  Read committed only: under a transaction snapshot
// the statement also checks that a conflicting row is visible to it
// (the caller falls back to the statement there).
// PostgreSQL regime.
bool InsertOnConflictDoNothingPg(ExecWrite *w, TupleTableSlot *slot, Oid arbiter);

// Inserts the rows of slots[0..n) (NOT NULL and CHECK constraints already
// checked by the caller) so that they end as INSERT ... ON CONFLICT
// (arbiter) DO NOTHING, row after row, leaves them, without the
// speculative insertion protocol: the rows go in together
// (table_multi_insert, one WAL record per page), then their index entries,
// the arbiter's with a partial uniqueness check (UNIQUE_CHECK_PARTIAL, as
// for a deferred constraint: no error, a possible duplicate reported).
// Only where a duplicate is reported does the row's key get looked up (a
// dirty-snapshot scan of the arbiter, as check_exclusion_or_unique_constraint
// does): an uncommitted row of another transaction is waited for and the
// key looked up again; a committed row, or one of this transaction
// (an earlier element among them), means the key is taken, and the new row
// is deleted again (it was never visible to anyone: it dies with the
// command).  inserted[i] gets 1 or 0; returns the number inserted.
// Costs against InsertOnConflictDoNothingPg: no pre-check index descent, no
// speculative token, no confirmation WAL record per row.  The price: a
// concurrent inserter of the same key is waited for as a plain INSERT waits
// (two transactions inserting two same keys in opposite orders can
// deadlock, 40P01), where speculative insertion never deadlocks; so only
// for keys that concurrent transactions do not insert at once: outbox rows
// of entity-ordered targets, whose writers hold the entity record's lock
// (docs/internals.md, "The outbox without speculative insertion").
// Read committed only (as InsertOnConflictDoNothingPg).  Needs the indexes
// opened as for speculative insertion (BeginExecWritePg, speculative =
// true: the arbiter's equality procedures).  PostgreSQL regime.
int InsertSkippingTakenKeysPg(ExecWrite *w, TupleTableSlot **slots, int n, Oid arbiter, char *inserted);

// Upserts the full after-images `images` (one per key, no key twice) into
// `t` as `as`: each row is looked up by the target's unique key index
// (RelationFindReplTupleByIndex, which locks it) and updated
// (ExecSimpleRelationUpdate: HOT where possible, stored generated columns
// computed, NOT NULL checked), else inserted (ExecSimpleRelationInsert).
// Returns false, having written nothing, where an INSERT statement could
// behave differently: the transaction is REPEATABLE READ or SERIALIZABLE
// (the statement works on its snapshot) or read-only, `as` lacks USAGE on
// the schema or table-level SELECT,
// INSERT and UPDATE (the statement reports it, or honours column
// privileges), the table gained triggers, rules or row-level security, the
// key index is partial or on expressions, UPDATE would need a replica
// identity the table lacks, or cdc.direct_writes is off.  Errors: as the
// statement's (23505 when another transaction inserted the key meanwhile,
// 23502 for a NULL in a NOT NULL column), as PgError.
bool UpsertRowsDirect(const Target &t, const std::vector<const Image *> &images, const RunAs &as);

// Finds the row of each key of `keys` (images holding at least the key
// columns, no key twice) by the target's unique key index, locking it as
// PostgreSQL's own apply does (RelationFindReplTupleByIndex, FOR UPDATE),
// and with `remove` deletes it (ExecSimpleRelationDelete, as
// apply_handle_delete_internal).  With `rows` (resized to keys.size()),
// (*rows)[i] gets to_jsonb() of key i's row as it was (RowJsonbPg: what
// `RETURNING to_jsonb(t)` gives), in the caller's memory context; nullopt
// where the key has no row.  Returns false, having read nothing, where a
// statement could behave differently: the conditions of UpsertRowsDirect,
// with the privileges SELECT and DELETE for a removal, SELECT and UPDATE
// for a read (the lock, as SELECT ... FOR UPDATE).  Errors: as the
// statement's, as PgError.
bool FindRowsDirect(const Target &t, const std::vector<const Image *> &keys, bool remove,
                    std::vector<std::optional<Datum>> *rows, const RunAs &as);

} // namespace cdc::pg
