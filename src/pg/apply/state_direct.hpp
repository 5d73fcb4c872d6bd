// The dedup claim and the entity records written through the executor and
// the table access method instead of an SQL statement (docs/internals.md,
// "Writes without SQL"): the three statements of every change that
// cdc_apply() and the worker's change-by-change path run on the engine's
// own tables, cdc.ledger and cdc.entity_state.
//
//  - ClaimDeliveryDirectPg: INSERT ... ON CONFLICT (digest) DO NOTHING as
//    the executor runs it, by speculative insertion on the primary key
//    (nodeModifyTable.c, ExecInsert): a concurrent uncommitted claim of the
//    same digest is waited for, then is a duplicate (or, when it aborted,
//    the claim goes through); never 23505.
//  - LockEntityRecordDirectPg: SELECT ... FOR UPDATE by the primary key as
//    the apply worker finds a row (execReplication.c,
//    RelationFindReplTupleByIndex): waits for a concurrent writer, follows
//    its update, locks the row.
//  - UpdateEntityRecordDirectPg / InsertEntityRecordDirectPg: the UPDATE of
//    the row locked before (ExecSimpleRelationUpdate: HOT where possible),
//    or INSERT ... ON CONFLICT (target, key) DO NOTHING by speculative
//    insertion.
//
// Each returns kNotDirect, having done nothing, where the SQL statement
// could behave differently, and the caller (state_store.cpp) then runs the
// statement: the setting cdc.direct_writes is off, the transaction uses
// one snapshot (REPEATABLE READ, SERIALIZABLE: the statement's
// serialization checks) or is read-only (the statement raises 25006),
// the current user (the extension owner, through
// PgCallAs) lacks a privilege the statement needs, or the table gained
// triggers, rules, row-level security that applies, CHECK constraints,
// generated columns, or columns other than the ones the engine writes.
//
// PostgreSQL regime (plain data only); call through PgCallAs with
// RunAs::ExtensionOwner(), as the statements run.  Every write makes
// itself visible to later commands (CommandCounterIncrement), and each
// function starts with one, as SPI does before a statement.
#pragma once

#include "pg/guard.hpp"

extern "C" {
#include "storage/itemptr.h"
}

namespace cdc::pg {

constexpr int kNotDirect = -1;

// The columns of one cdc.entity_state row (the stored layout of
// core/layout.hpp).
struct EntityRow {
	int32 src;
	int32 v0;
	int64 v1;
	int64 v2;
	int32 v3;
	bool deleted;
	int32 chash;
	int32 touched_s;
};

// Where LockEntityRecord found (and locked) an entity record, for the
// UPDATE that follows in the same engine step: `valid` only when the
// direct path locked it.
struct EntityLocation {
	bool valid = false;
	ItemPointerData tid;
};

// 1: claimed (the ledger row is inserted); 0: the digest is there
// (committed, or committed by the concurrent claimer waited for).
int ClaimDeliveryDirectPg(int64 digest, Oid target, int32 claimed_s);

// 1: found and locked, *row and *loc filled; 0: no record.
int LockEntityRecordDirectPg(Oid target, const char *key, int key_len, EntityRow *row, EntityLocation *loc);

// Updates the record locked at *loc to *row.  1 when done.
int UpdateEntityRecordDirectPg(const EntityLocation *loc, Oid target, const char *key, int key_len,
                               const EntityRow *row);

// 1: inserted; 0: a record of (target, key) exists (a concurrent
// transaction created it and committed).
int InsertEntityRecordDirectPg(Oid target, const char *key, int key_len, const EntityRow *row);

} // namespace cdc::pg
