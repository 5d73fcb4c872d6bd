// The dedup claim and the entity records written through the executor and
// the table access method instead of an SQL statement (docs/internals.md,
// "Writes without SQL"): the three statements of every change that
// cdc_apply() and the worker's change-by-change path run on the engine's
// own tables, cdc.ledger and cdc.entity_state, and the same statements of a
// batch's set-based segment (segment.cpp) over all its rows at once.
//
//  - ClaimDeliveryDirectPg: INSERT ... ON CONFLICT (digest) DO NOTHING
//    with the statement's outcome (InsertSkippingTakenKeysPg with its
//    pre-check, table_write.hpp): a concurrent uncommitted claim of the
//    same digest is waited for, then is a duplicate (or, when it aborted,
//    the claim goes through); never 23505.
//  - LockEntityRecordsDirectPg: SELECT ... FOR UPDATE by the primary key as
//    the apply worker finds a row (execReplication.c,
//    RelationFindReplTupleByIndex): waits for a concurrent writer, follows
//    its update, locks the row.
//  - ReadEntityRecordsDirectPg: entity records read (change by change and
//    a batch's) without a lock, by the primary key with a new snapshot
//    (RowFinder, table_write.hpp); their update reports those that changed
//    meanwhile, decided again under the lock.
//  - UpdateEntityRecordDirectPg / InsertEntityRecordDirectPg: the UPDATE of
//    the row locked or read before (as ExecSimpleRelationUpdate: HOT where
//    possible),
//    or INSERT ... ON CONFLICT (target, key) DO NOTHING
//    (InsertSkippingTakenKeysPg, without pre-check).
//  - ReadWatermarkDirectPg: the SELECT of cdc.prune_watermark by its
//    primary key, an index scan with the statement's new snapshot.
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

// Where the direct path found an entity record, for the UPDATE that
// follows in the same engine step: `valid` only when the direct path found
// it (LockEntityRecord, LockEntityRecordsDirectPg: `locked`;
// ReadEntityRecordsDirectPg: not).
struct EntityLocation {
	bool valid = false;
	bool locked = false;
	ItemPointerData tid;
};

// An entity record's key (cdc.entity_state.key), not owned.
struct EntityKeyRef {
	const char *data;
	int len;
};

// The batch forms run one statement's worth of rows with one relation open
// and one executor state, in array order; each returns 1 when done and
// kNotDirect, having done nothing, as above.  The single forms are these
// with one row.

// Claims n digests in order: claimed[i] 1 when inserted, 0 when the digest
// is there (committed, or committed by the concurrent claimer waited for,
// or claimed by an earlier element of this call).
int ClaimDeliveriesDirectPg(int n, const int64 *digest, const Oid *target, int32 claimed_s, char *claimed);
// 1: claimed (the ledger row is inserted); 0: the digest is there.
int ClaimDeliveryDirectPg(int64 digest, Oid target, int32 claimed_s);

// Locks the records of n keys of `target`, in order: found[i] 1 with
// rows[i] and locs[i] filled, 0 (locs[i] not valid) when there is none.
int LockEntityRecordsDirectPg(Oid target, int n, const EntityKeyRef *keys, EntityRow *rows, EntityLocation *locs,
                              char *found);
// As LockEntityRecordsDirectPg, without the lock: the records as a new
// snapshot sees them (the latest committed and this transaction's own), a
// concurrent writer not waited for.  Their update (UpdateEntityRecordsDirectPg
// with `lost`) finds out whether they changed since: the entity record
// then takes no WAL-logged row lock of its own (docs/internals.md,
// "Entity records without a row lock").
int ReadEntityRecordsDirectPg(Oid target, int n, const EntityKeyRef *keys, EntityRow *rows, EntityLocation *locs,
                              char *found);
// One key's record, locked (`lock`: LockEntityRecordsDirectPg) or not
// (ReadEntityRecordsDirectPg).  1: found, *row and *loc filled; 0: no
// record.
int FindEntityRecordDirectPg(Oid target, const char *key, int key_len, EntityRow *row, EntityLocation *loc,
                             bool lock);

// Updates the records found at locs[] to rows[].  A record locked there
// is updated (a concurrent change of it raises XX000, as in
// ExecSimpleRelationUpdate); one read unlocked is updated unless another
// transaction updated or deleted it since (waited for, as UPDATE waits):
// then lost[i] = 1 and nothing is written for it, so that the caller
// decides its entity again under a lock.  kNotDirect, having written
// nothing, when one of them was not found by the direct path, or was read
// unlocked and `lost` is NULL.
int UpdateEntityRecordsDirectPg(Oid target, int n, const EntityKeyRef *keys, const EntityLocation *locs,
                                const EntityRow *rows, char *lost);
// Updates the record found at *loc to *row.  1 when done; 0 when it was
// read unlocked and another transaction changed it since (nothing
// written).
int UpdateEntityRecordDirectPg(const EntityLocation *loc, Oid target, const char *key, int key_len,
                               const EntityRow *row);

// Inserts n records: inserted[i] 0 where a record of (target, key) exists
// (a concurrent transaction created it and committed).
int InsertEntityRecordsDirectPg(Oid target, int n, const EntityKeyRef *keys, const EntityRow *rows, char *inserted);
// 1: inserted; 0: a record of (target, key) exists.
int InsertEntityRecordDirectPg(Oid target, const char *key, int key_len, const EntityRow *row);

// The prune watermark of (target, source id), read by the primary key as
// the statement reads it (a new snapshot after the writes before it,
// READ COMMITTED): 1 with the version parts filled, 0 when cdc.prune()
// removed no tombstone of that pair.  Runs as the extension owner (SELECT).
int ReadWatermarkDirectPg(Oid target, int32 src, int32 *v0, int64 *v1, int64 *v2, int32 *v3);

} // namespace cdc::pg
