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
#include "access/genam.h"
#include "access/tableam.h"
#include "executor/executor.h"
#include "nodes/execnodes.h"
#include "utils/rel.h"
}

namespace cdc::pg {

// The columns a direct write places Datums in, or an outbox payload is
// formed from: attnums[i] holds values of types[i] (typmods[i]), converted
// with the target's cached metadata (target.cpp) when the call read it.
struct DirectColumns {
	const AttrNumber *attnums;
	const Oid *types;
	const int32 *typmods;
	int n;
};

// Is every column of `cols` still in `rel` with the type and typmod its
// values were converted to?  User code that runs during a call (a trigger
// of another target of the batch, a handler, a domain CHECK or a default)
// may ALTER the target after its metadata was read and its values
// converted: a Datum placed in the new descriptor as it is would be read as
// another type (an int read as a text pointer crashed the server; regress
// nested_ddl_direct).  Direct writes take the statement then (its plan's
// parameter types are the converted values' own, and PostgreSQL re-plans
// it after the DDL, coercing the values or raising a clear error);
// ImageJsonbPg (outbox.cpp) refuses with 55006.  PostgreSQL regime; no
// errors.
bool ColumnsAsConvertedPg(Relation rel, const DirectColumns &cols);

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

// Raises 0A000 while one of the engine's speculative insertions of a new key
// is in progress in this backend (its index entries run the target's user
// code, which may call cdc_apply()): an apply started there could update
// the speculative row before it is confirmed, which corrupts its HOT chain
// (security review h2, regress speculative_reentry).  ApplyEngine's
// constructor calls it.  PostgreSQL regime.
void RefuseApplyDuringSpeculativeInsertionPg();

// Finds rows of a table by a unique index with the index's own equality
// operators and collations, one scan (its keys built once) serving every
// look-up of a write.  With `snapshot` NULL, as the apply worker finds a
// row (RelationFindReplTupleByIndex, execReplication.c): a dirty snapshot,
// and a row another transaction is inserting, updating, deleting or
// locking waited for and looked up again, so that the row found is the
// key's latest committed one (or this transaction's own).  With a
// snapshot: the row it sees, nothing waited for.  Unlike
// RelationFindReplTupleByIndex the row found is never locked: its update
// by TID (UpdateRowAtPg, RowWrittenPg) reports a row another transaction
// changed since (docs/internals.md, "Target rows without a row lock",
// "Entity records without a row lock").
//
// Each look-up first tries where the key's row was last seen (the backend's
// row location cache, core/location_cache.hpp, sized by
// cdc.row_location_cache): the heap tuple there is taken only when it is
// visible to the finder's snapshot, no other transaction is writing it, and
// its key equals the key looked for under the index's equality operators;
// else the index is scanned as above (docs/internals.md, "Rows found where
// they were last seen").  Plain data; PostgreSQL regime.
// The key columns of an index (their heap attribute numbers) and what tags
// a key in the row location cache (table_write.cpp, KeyTagPg): `on` when
// the cache is in use and may serve the index (RowLocationsUsablePg), and
// only then `seed`.  Plain data; PostgreSQL regime.
struct RowLocationKeys {
	bool on;
	uint64 seed; /* the relation's file and the index: every tag's start */
	int nkeys;
	AttrNumber heap_attno[INDEX_MAX_KEYS];
};
// Fills `k` for rows of `rel` found by `index` (NULL: no key columns,
// k->on false).
void BeginRowLocationKeysPg(Relation rel, Relation index, RowLocationKeys *k);
// Remembers where the row in `row` now is (its key values in tts_values,
// its tts_tid the root of its HOT chain: just inserted, or updated with
// new index entries), for the next FindRowPg of its key; nothing when
// k->on is false.
void NoteRowLocationPg(const RowLocationKeys *k, TupleTableSlot *row);

struct RowFinder {
	MemoryContext cxt; /* the scan's: what the index AM keeps between look-ups lives there */
	Relation index;
	IndexScanDesc scan;
	SnapshotData dirty;
	bool wait; /* the dirty snapshot, writers waited for */
	ScanKeyData skey[INDEX_MAX_KEYS]; /* one per key column of `loc` */
	/* the key columns, and the row location cache's use (fetch NULL when loc.on is false) */
	RowLocationKeys loc;
	IndexFetchTableData *fetch;
	Snapshot snapshot;   /* the snapshot of fetches: &dirty when `wait` */
	BlockNumber nblocks; /* a lower bound of the heap's size (HeapBlocksForPg): a location beyond is not fetched */
	uint64 tag;          /* the last look-up's key (tag_ok: one could be made) */
	bool tag_ok;
};
// Opens `indexoid` of `rel` and starts the scan in the current memory
// context; `snapshot` as above (kept by the caller until EndRowFinderPg).
void BeginRowFinderPg(RowFinder *f, Relation rel, Oid indexoid, Snapshot snapshot);
void EndRowFinderPg(RowFinder *f);
// The row holding the key values of `search` (by heap attribute number;
// a NULL key value matches no row) into `out`; false when there is none.
// A row found through the index is remembered at its index entry's TID.
bool FindRowPg(RowFinder *f, TupleTableSlot *search, TupleTableSlot *out);
// Forgets the location of the last FindRowPg's key (its row was deleted).
void ForgetRowLocationPg(RowFinder *f);

// For the result of table_tuple_update or table_tuple_delete called with
// `wait`: true when the row was written; false when another transaction
// updated or deleted it (and committed: it was waited for) since it was
// found, nothing written.  A change of this transaction's own since then
// raises XX000 "tuple already updated by self", as
// simple_table_tuple_update does.  PostgreSQL regime.
bool RowWrittenPg(TM_Result r);

// The UPDATE of the row at `tid` of rri's relation to `slot` as
// simple_table_tuple_update makes it (HOT where possible), then its index
// entries where it was not HOT (ExecInsertIndexTuples); RowWrittenPg's
// result (false: nothing written).  Constraints, generated columns and
// triggers are the caller's.  PostgreSQL regime.
// `moved` (when given): set to whether the new version got index entries
// of its own (not a HOT update), so that slot->tts_tid is where the key's
// index entry now points.
bool UpdateRowAtPg(ResultRelInfo *rri, EState *estate, ItemPointer tid, TupleTableSlot *slot, bool *moved = nullptr);
void EndExecWritePg(ExecWrite *w);

// The index `index` among those BeginExecWritePg opened for w's relation,
// with its IndexInfo in *info when given; NULL when it is not one of them.
// PostgreSQL regime.
Relation OpenedIndexPg(const ExecWrite *w, Oid index, IndexInfo **info = nullptr);

// Inserts the rows of slots[0..n) (NOT NULL and CHECK constraints already
// checked by the caller) so that they end as INSERT ... ON CONFLICT
// (arbiter) DO NOTHING, row after row in array order, leaves them, without
// the speculative insertion protocol: the rows go in together
// (table_multi_insert, one WAL record per page), then their index entries,
// the arbiter's with a partial uniqueness check (UNIQUE_CHECK_PARTIAL, as
// for a deferred constraint: no error, a possible duplicate reported).
// Only where a duplicate is reported does the row's key get looked up (a
// dirty-snapshot scan of the arbiter, as check_exclusion_or_unique_constraint
// does): an uncommitted row of another transaction is waited for and the
// key looked up again; a committed row, or one of this transaction (an
// earlier element among them), means the key is taken, and the new row is
// deleted again (it was never visible to anyone: it dies with the
// command).  With `precheck`, each row's key is first looked up as the
// statement's pre-check does (ExecCheckIndexConstraints, waiting for an
// uncommitted row), and a row whose key is taken is not inserted at all:
// for keys that are often taken (a delivery claimed again), and where a
// reader of the WAL must not see the insert of such a row (the outbox, for
// relays decoding it).  inserted[i]
// gets 1 or 0; returns the number inserted.
// Against the statement's speculative insertion (nodeModifyTable.c,
// ExecInsert): no speculative insertion lock and no
// confirmation WAL record per row (48 B), rows inserted a page at a time,
// and without `precheck` no pre-check descent.  The outcome is the
// statement's; what speculative insertion adds, that two inserters of one
// key in flight at once never wait on each other's transaction, matters
// where a conflict leads to an update of the existing row, not here: after
// its confirmation a speculative row is waited for as ours is, so
// transactions inserting the same keys in opposite orders can deadlock
// (40P01) either way, as with INSERT ... ON CONFLICT DO NOTHING.
// Read committed only: under a transaction snapshot the statement also
// checks that a conflicting row is visible to it.  Needs the indexes
// opened as for speculative insertion (BeginExecWritePg, speculative =
// true: the arbiter's equality procedures).  PostgreSQL regime.
// docs/internals.md, "Inserts without speculative insertion".
int InsertSkippingTakenKeysPg(ExecWrite *w, TupleTableSlot **slots, int n, Oid arbiter, bool precheck, char *inserted);

// Inserts n rows into w's relation, row i filled into a cleared slot by
// fill(slot, i), in chunks of kInsertChunk rows as COPY buffers them: with
// a valid `arbiter`, by InsertSkippingTakenKeysPg (`precheck` as there),
// else as COPY inserts them (table_multi_insert and every index entry; a
// duplicate key raises 23505).  NOT NULL and CHECK constraints are checked
// per row (ExecConstraints).  inserted[i] (when given) says whether row i
// went in; returns the number inserted.  With an arbiter and `remember`,
// where each row went in is noted in the row location cache.  The rows' values live in the
// per-tuple memory of w's EState, reset per chunk.  The slots share an
// unpinned copy of the row type: a slot made on the relation's own
// descriptor pins it in the resource owner, whose forgetting is linear in
// the pins held (quadratic for a chunk).  PostgreSQL regime; `fill` must
// not throw.
constexpr int kInsertChunk = 1000;
template <typename Fill>
int64
InsertRowsPg(ExecWrite *w, int64 n, Oid arbiter, bool precheck, char *inserted, Fill fill,
             const RowLocationKeys *remember = nullptr)
{
	Relation rel = w->rri->ri_RelationDesc;
	const int chunk = int(n < kInsertChunk ? n : kInsertChunk);
	if (chunk <= 0)
		return 0;
	TupleDesc slot_desc = CreateTupleDescCopy(RelationGetDescr(rel));
	TupleTableSlot **slots = (TupleTableSlot **) palloc(sizeof(TupleTableSlot *) * size_t(chunk));
	for (int j = 0; j < chunk; j++)
		slots[j] = MakeSingleTupleTableSlot(slot_desc, &TTSOpsVirtual);
	char *scratch = OidIsValid(arbiter) && inserted == nullptr ? (char *) palloc(size_t(chunk)) : nullptr;
	const bool constrained = RelationGetDescr(rel)->constr != NULL;
	int64 count = 0;
	for (int64 from = 0; from < n; from += chunk) {
		const int m = int(n - from < chunk ? n - from : chunk);
		MemoryContext caller = MemoryContextSwitchTo(GetPerTupleMemoryContext(w->estate));
		for (int j = 0; j < m; j++) {
			ExecClearTuple(slots[j]);
			fill(slots[j], from + j);
			if (constrained)
				ExecConstraints(w->rri, slots[j], w->estate); /* NOT NULL, as the statement checks */
		}
		if (OidIsValid(arbiter)) {
			char *went_in = scratch != nullptr ? scratch : inserted + from;
			count += InsertSkippingTakenKeysPg(w, slots, m, arbiter, precheck, went_in);
			for (int j = 0; remember != nullptr && remember->on && j < m; j++)
				if (went_in[j])
					NoteRowLocationPg(remember, slots[j]);
		} else {
			table_multi_insert(rel, slots, m, w->estate->es_output_cid, 0, NULL);
			for (int j = 0; j < m; j++)
				if (w->rri->ri_NumIndices > 0)
					ExecInsertIndexTuples(w->rri, slots[j], w->estate, false, false, NULL, NIL);
			for (int j = 0; inserted != nullptr && j < m; j++)
				inserted[from + j] = 1;
			count += m;
		}
		for (int j = 0; j < m; j++)
			ExecClearTuple(slots[j]);
		MemoryContextSwitchTo(caller);
		ResetPerTupleExprContext(w->estate);
	}
	for (int j = 0; j < chunk; j++)
		ExecDropSingleTupleTableSlot(slots[j]);
	pfree(slots);
	if (scratch != nullptr)
		pfree(scratch);
	return count;
}

// Upserts the full after-images `images` (one per key, no key twice) into
// `t` as `as`: each row is looked up by the target's unique key index as
// RelationFindReplTupleByIndex finds it (a dirty snapshot, a concurrent
// writer waited for), without locking it, and updated as
// ExecSimpleRelationUpdate updates it (HOT where possible, stored generated
// columns computed, NOT NULL checked), else inserted as
// ExecSimpleRelationInsert inserts it, the key by speculative insertion
// as ON CONFLICT inserts it; a row another transaction changed between the
// look-up and the write is looked up again, and a row of the key another
// transaction committed meanwhile is updated instead (docs/internals.md,
// "Target rows without a row lock").
// Returns false, having written nothing, where an INSERT statement could
// behave differently: the transaction is REPEATABLE READ or SERIALIZABLE
// (the statement works on its snapshot) or read-only, `as` lacks USAGE on
// the schema or table-level SELECT,
// INSERT and UPDATE (the statement reports it, or honours column
// privileges), the table gained triggers, rules or row-level security, the
// key index is partial or on expressions, UPDATE would need a replica
// identity the table lacks, or cdc.direct_writes is off.  Errors: as the
// statement's (23502 for a NULL in a NOT NULL column, 23505 for a
// duplicate in another unique index), as PgError.
// `absent` (nullptr, or one flag per image): images whose row the source's
// history or the entity records say is not there (RowExpectedAbsent,
// MarkCreateFromRecord, core/batch_plan.hpp) are
// inserted first, by the same speculative insertion, and looked up only if
// the key is taken after all, which then takes the insert back and updates
// the row it finds: the result is the same, one index descent less per
// new row (docs/internals.md, "Insert first").
bool UpsertRowsDirect(const Target &t, const std::vector<const Image *> &images, const RunAs &as,
                      const std::vector<char> *absent = nullptr);

// Finds the row of each key of `keys` (images holding at least the key
// columns, no key twice) by the target's unique key index: with `remove`
// found as above, unlocked, and deleted as ExecSimpleRelationDelete
// deletes it (apply_handle_delete_internal), a row changed in between
// looked up again (and read again); without, locked as PostgreSQL's own
// apply does (RelationFindReplTupleByIndex, FOR UPDATE).  With `rows` (resized to keys.size()),
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
