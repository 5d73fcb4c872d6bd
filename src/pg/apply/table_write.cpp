// Target rows written without SQL: see table_write.hpp.
//
// Glue: UpsertRowsDirectPg is PostgreSQL regime (plain data, called only
// through PgCallAs); UpsertRowsDirect lays the images out for it.
#include "pg/apply/table_write.hpp"

#include "pg/apply/engine.hpp"
#include "pg/apply/outbox.hpp"
#include "pg/apply/target.hpp"
#include "pg/guc.hpp"

#include "core/location_cache.hpp"

#include <memory>
#include <new>

extern "C" {
#include "access/genam.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_class.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "executor/nodeModifyTable.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
}

namespace cdc::pg {

/* The check of ColumnsAsConvertedPg (table_write.hpp). */
bool
ColumnsAsConvertedPg(Relation rel, const DirectColumns &cols)
{
	TupleDesc desc = RelationGetDescr(rel);
	for (int i = 0; i < cols.n; i++) {
		AttrNumber a = cols.attnums[i];
		if (a < 1 || a > desc->natts)
			return false;
		Form_pg_attribute att = TupleDescAttr(desc, a - 1);
		if (att->attisdropped || att->atttypid != cols.types[i] || att->atttypmod != cols.typmods[i])
			return false;
	}
	return true;
}

namespace {

/*
 * May a target row be written without the statement in this transaction?
 * Not under REPEATABLE READ or SERIALIZABLE: RelationFindReplTupleByIndex
 * finds and locks the newest committed row, where the statement sees the
 * transaction's snapshot (a row inserted after it is invisible, one updated
 * after it raises 40001) and SERIALIZABLE takes predicate locks; not in a
 * read-only transaction, where the statement raises 25006.
 */
bool
DirectTargetWritesAllowedPg()
{
	return !IsolationUsesXactSnapshot() && !XactReadOnly && !IsInParallelMode();
}

/*
 * Does the unique index `indexoid` of `rel` compare its key columns as the
 * statement's "t.col = $n" does: the column's collation and an operator
 * family holding the type's default equality (the operator the statement
 * uses, target.cpp, EqualityOperatorPg)?  An index declared with another
 * collation (say a nondeterministic, case-insensitive one on a "C" column)
 * finds a row the statement's predicate does not match: the key 'abc'
 * would find and remove the row 'ABC'.
 */
bool
IndexComparesAsColumnsPg(Relation rel, Oid indexoid)
{
	Relation idx = index_open(indexoid, AccessShareLock);
	TupleDesc desc = RelationGetDescr(rel);
	bool ok = true;
	for (int j = 0; ok && j < idx->rd_index->indnkeyatts; j++) {
		AttrNumber a = idx->rd_index->indkey.values[j];
		Form_pg_attribute att = TupleDescAttr(desc, a - 1);
		TypeCacheEntry *tce = lookup_type_cache(att->atttypid, TYPECACHE_EQ_OPR);
		ok = idx->rd_indcollation[j] == att->attcollation && OidIsValid(tce->eq_opr) &&
		     op_in_opfamily(tce->eq_opr, idx->rd_opfamily[j]);
	}
	index_close(idx, NoLock);
	return ok;
}


/*
 * Opens the target `relid` (RowExclusiveLock, as the statement locks it)
 * for a write without the statement, with *index its unique index on the
 * key columns key[0..nkey): NULL where the statement could behave
 * differently (DirectTargetWritesAllowedPg; the current user lacks USAGE on
 * the schema or any of `need` on the table; not a plain table, or one with
 * triggers, rules, row-level security or inheritance children (the
 * statements read "ONLY t", Target::own_rows, as the index of t does, but
 * such a parent is rare and stays on the statement path); no replica identity for UPDATE and DELETE
 * (CheckCmdReplicaIdentity); no such index, or one comparing the key with
 * another collation or equality than the statement's; a column of cols[]
 * that is no longer there with the type and typmod the values were made
 * for, see ColumnsAsConvertedPg).
 */
Relation
OpenDirectTargetPg(Oid relid, const AttrNumber *key, int nkey, AclMode need, Oid *index, const DirectColumns &cols)
{
	*index = InvalidOid;
	if (!DirectTargetWritesAllowedPg())
		return NULL;
	Oid userid = GetUserId();
	if (pg_namespace_aclcheck(get_rel_namespace(relid), userid, ACL_USAGE) != ACLCHECK_OK ||
	    pg_class_aclmask(relid, userid, need, ACLMASK_ALL) != need)
		return NULL;
	Relation rel = table_open(relid, RowExclusiveLock);
	bool plain = ColumnsAsConvertedPg(rel, cols) && rel->rd_rel->relkind == RELKIND_RELATION &&
	             rel->trigdesc == NULL && !rel->rd_rel->relhasrules &&
	             !rel->rd_rel->relrowsecurity && !rel->rd_rel->relhassubclass &&
	             (rel->rd_rel->relreplident == REPLICA_IDENTITY_FULL || OidIsValid(RelationGetReplicaIndex(rel)));
	if (plain)
		*index = UniqueIndexOnPg(rel, key, nkey);
	if (OidIsValid(*index) && !IndexComparesAsColumnsPg(rel, *index))
		*index = InvalidOid;
	if (!OidIsValid(*index)) {
		table_close(rel, NoLock);
		return NULL;
	}
	return rel;
}

/*
 * What ExecSimpleRelationUpdate and ExecSimpleRelationInsert do to a row
 * before writing it on a table without triggers (OpenDirectTargetPg): the
 * replica identity check of the command, stored generated columns
 * computed, constraints and the partition constraint checked.
 */
void
PrepareRowForWritePg(ResultRelInfo *rri, EState *estate, TupleTableSlot *slot, CmdType cmd)
{
	Relation rel = rri->ri_RelationDesc;
	CheckCmdReplicaIdentity(rel, cmd);
	if (rel->rd_att->constr != NULL && rel->rd_att->constr->has_generated_stored)
		ExecComputeStoredGenerated(rri, estate, slot, cmd);
	if (rel->rd_att->constr != NULL)
		ExecConstraints(rri, slot, estate);
	if (rel->rd_rel->relispartition)
		ExecPartitionCheck(rri, slot, estate, true);
}

/*
 * The UPDATE of the row `found` to `slot`, as ExecSimpleRelationUpdate
 * makes it on a table without triggers (OpenDirectTargetPg): stored
 * generated columns computed, constraints and the partition constraint
 * checked, HOT where possible, index entries otherwise.  A concurrent
 * writer of the row is waited for; when it updated or deleted the row
 * (committed), nothing is written and the result is false (the statement's
 * EvalPlanQual would follow the row; the caller looks the key up again).
 */
bool
UpdateFoundRowPg(ResultRelInfo *rri, EState *estate, TupleTableSlot *found, TupleTableSlot *slot, bool *moved)
{
	PrepareRowForWritePg(rri, estate, slot, CMD_UPDATE);
	return UpdateRowAtPg(rri, estate, &found->tts_tid, slot, moved);
}

/* The DELETE of the row `found`, as ExecSimpleRelationDelete makes it without triggers; false as above. */
bool
DeleteFoundRowPg(ResultRelInfo *rri, EState *estate, TupleTableSlot *found)
{
	Relation rel = rri->ri_RelationDesc;
	CheckCmdReplicaIdentity(rel, CMD_DELETE);
	TM_FailureData tmfd;
	return RowWrittenPg(table_tuple_delete(rel, &found->tts_tid, GetCurrentCommandId(true), estate->es_snapshot,
	                                       InvalidSnapshot, true /* wait */, &tmfd, false /* changingPart */));
}

/*
 * The target whose row InsertMissingRowPg is inserting by speculative
 * insertion, InvalidOid outside one.  Between the speculative heap tuple
 * and its confirmation the index entries run the target's user code; an
 * apply started from there (cdc_apply() in an index expression's
 * function) found the speculative row through its dirty snapshot and
 * updated it, and the confirmation then overwrote that row's t_ctid: a
 * HOT chain that points to itself, on which index scans loop for ever
 * and VACUUM crashes; or it took and released the backend's one
 * speculative-insertion lock under ours (security review h2, regress
 * speculative_reentry).  The engine refuses to start meanwhile.
 */
static Oid speculative_insertion_rel = InvalidOid;

/*
 * The INSERT of a row whose key FindRowPg found no row for, as
 * ExecSimpleRelationInsert makes it on a table without triggers (stored
 * generated columns computed, constraints and the partition constraint
 * checked), except that the key is inserted as INSERT ... ON CONFLICT
 * (key) inserts it, by speculative insertion (ExecInsert,
 * nodeModifyTable.c): a row of the key that another transaction inserted
 * since the look-up (a writer outside the engine: the engine's own writers
 * of an entity are ordered by its record) is not 23505.  Our row is then
 * taken back at once (table_tuple_complete_speculative with
 * succeeded = false, which no transaction waits on afterwards) and the
 * result is false; the caller looks the key up again, waiting for that
 * transaction, and updates its row, as the statement's DO UPDATE does.
 * Taking the row back before waiting is what keeps two writers of the key
 * from waiting on each other (a plain insert left our row live while we
 * waited: 40P01 when the other transaction then touched the key again,
 * direct_upsert_taken_deadlock.spec).  The confirmation is one WAL record
 * (48 B) per inserted row, as the statement writes.  Needs the indexes
 * opened for it (BeginTargetWritePg, `inserts`).
 */
bool
InsertMissingRowPg(ExecWrite *w, Oid key_index, TupleTableSlot *slot)
{
	Relation rel = w->rri->ri_RelationDesc;
	EState *estate = w->estate;
	PrepareRowForWritePg(w->rri, estate, slot, CMD_INSERT);
	List *arbiter = list_make1_oid(key_index);
	const TransactionId xid = GetCurrentTransactionId();
	uint32 token = SpeculativeInsertionLockAcquire(xid);
	/*
	 * The index entries run user code (expressions, predicates, operator
	 * classes), which must not start an apply while the row is speculative
	 * (RefuseApplyDuringSpeculativeInsertionPg): cleared however this ends.
	 */
	const Oid outer = speculative_insertion_rel;
	speculative_insertion_rel = RelationGetRelid(rel);
	volatile bool conflicted = false;
	PG_TRY();
	{
		table_tuple_insert_speculative(rel, slot, estate->es_output_cid, 0, NULL, token);
		bool conflict = false;
		list_free(ExecInsertIndexTuples(w->rri, slot, estate, false, true, &conflict, arbiter));
		table_tuple_complete_speculative(rel, slot, token, !conflict);
		conflicted = conflict;
	}
	PG_FINALLY();
	{
		speculative_insertion_rel = outer;
	}
	PG_END_TRY();
	SpeculativeInsertionLockRelease(xid);
	list_free(arbiter);
	return !conflicted;
}

/*
 * A target write that finds rows by index and updates or deletes them: the
 * target opened by OpenDirectTargetPg, the transaction snapshot as the
 * active one, the executor state, and the finder of rows by the key index.
 * Plain data (PostgreSQL regime).
 */
struct TargetWrite {
	Relation rel;
	Oid index;
	ExecWrite w;
	RowFinder finder;
};

/*
 * false, with nothing open, where OpenDirectTargetPg declines.
 * `inserts`: the indexes opened for InsertMissingRowPg (the key index's
 * equality procedures).
 */
bool
BeginTargetWritePg(Oid relid, const AttrNumber *key, int nkey, AclMode need, const DirectColumns &cols, TargetWrite *tw,
                   bool inserts = false)
{
	tw->rel = OpenDirectTargetPg(relid, key, nkey, need, &tw->index, cols);
	if (tw->rel == NULL)
		return false;
	PushActiveSnapshot(GetTransactionSnapshot());
	BeginExecWritePg(tw->rel, need, &tw->w, inserts);
	tw->w.estate->es_snapshot = GetActiveSnapshot();
	BeginRowFinderPg(&tw->finder, tw->rel, tw->index, /* wait */ NULL);
	return true;
}

/* Ends it and closes the target (its lock is kept to the end of the transaction). */
void
EndTargetWritePg(TargetWrite *tw)
{
	EndRowFinderPg(&tw->finder);
	ExecResetTupleTable(tw->w.estate->es_tupleTable, false);
	EndExecWritePg(&tw->w);
	PopActiveSnapshot();
	table_close(tw->rel, NoLock);
}

/*
 * rows x ncols Datums (row-major) of the columns attnums[0..ncols): every
 * column but the stored generated ones, which the executor computes.
 */
bool
UpsertRowsDirectPg(Oid relid, const AttrNumber *key, int nkey, const AttrNumber *attnums, const Oid *types,
                   const int32 *typmods, int ncols, int nrows, const Datum *values, const bool *nulls, const char *absent)
{
	TargetWrite tw;
	if (!BeginTargetWritePg(relid, key, nkey, ACL_SELECT | ACL_INSERT | ACL_UPDATE,
	                        DirectColumns{attnums, types, typmods, ncols}, &tw, /* inserts */ true))
		return false;
	Relation rel = tw.rel;
	EState *estate = tw.w.estate;
	ResultRelInfo *rri = tw.w.rri;

	TupleDesc desc = RelationGetDescr(rel);
	/*
	 * A heap-tuple slot holding the row formed once: a virtual slot would
	 * be materialised (its values copied) and then formed into a tuple, two
	 * copies of an event-sized value where one does (docs/benchmarks.md,
	 * "Memory per event").
	 */
	TupleTableSlot *newslot = ExecInitExtraTupleSlot(estate, desc, &TTSOpsHeapTuple);
	Datum *row_values = (Datum *) palloc(sizeof(Datum) * (desc->natts + 1));
	bool *row_nulls = (bool *) palloc(sizeof(bool) * (desc->natts + 1));
	TupleTableSlot *localslot = table_slot_create(rel, &estate->es_tupleTable);
	/*
	 * Insert first only where a taken key can do nothing but take the
	 * insert back: with another unique index or an exclusion constraint,
	 * the row of the key would collide with our own values there and
	 * raise 23505 / 23P01 where the update it needs succeeds.
	 */
	bool insert_first = absent != NULL;
	for (int k = 0; insert_first && k < rri->ri_NumIndices; k++) {
		IndexInfo *ii = rri->ri_IndexRelationInfo[k];
		if (RelationGetRelid(rri->ri_IndexRelationDescs[k]) != tw.index && (ii->ii_Unique || ii->ii_ExclusionOps != NULL))
			insert_first = false;
	}
	for (int r = 0; r < nrows; r++) {
		NoteApplyProgressPg(); /* the worker's source keepalive, rate-limited (engine.hpp) */
		MemoryContextSwitchTo(GetPerTupleMemoryContext(estate));
		ExecClearTuple(newslot);
		for (int i = 0; i < desc->natts; i++) {
			row_values[i] = (Datum) 0;
			row_nulls[i] = true;
		}
		for (int c = 0; c < ncols; c++) {
			row_values[attnums[c] - 1] = values[size_t(r) * size_t(ncols) + size_t(c)];
			row_nulls[attnums[c] - 1] = nulls[size_t(r) * size_t(ncols) + size_t(c)];
		}
		/*
		 * The slot owns the tuple (else materialising it copies the tuple
		 * again): formed in the query context, which outlives the per-tuple
		 * resets, and freed by the next ExecClearTuple.  Deformed at once:
		 * FindRowPg reads the key from tts_values.
		 */
		MemoryContext per_tuple = MemoryContextSwitchTo(estate->es_query_cxt);
		HeapTuple row = heap_form_tuple(desc, row_values, row_nulls);
		MemoryContextSwitchTo(per_tuple);
		ExecStoreHeapTuple(row, newslot, true);
		slot_getallattrs(newslot);
		/*
		 * The row of the key, updated; a row another transaction changed
		 * since it was found is looked up again, as the apply worker's lock
		 * follows it (a row deleted meanwhile: the key is inserted).  No row:
		 * inserted, unless another transaction committed one of the key
		 * meanwhile, which is then found and updated.
		 */
		/*
		 * A row expected to be new (RowExpectedAbsent) is inserted first: the
		 * look-up would only find nothing (a descent of the key index for
		 * each new row, which native apply's insert does not make).  If the
		 * key is taken after all, the speculative insertion is taken back
		 * and the loop looks the row up and updates it, as when another
		 * transaction inserted the key between a look-up and the insert.
		 */
		bool inserted = false;
		if (insert_first && absent[r]) {
			inserted = InsertMissingRowPg(&tw.w, tw.index, newslot);
			/*
			 * A hint that was wrong says the destination has rows the
			 * source never had (a preloaded or diverged table): each more
			 * would leave a dead heap tuple and index entries behind, so
			 * the rest of this write looks keys up first again.
			 */
			if (!inserted) {
				insert_first = false;
				elog(DEBUG1, "cdc_apply: a key of table \"%s\" expected to be new is taken on the destination: the rest of "
				             "this write of %d rows looks keys up first",
				     RelationGetRelationName(rel), nrows);
			}
		}
		/*
		 * Where the row is now, for the key's next look-up: an inserted row,
		 * or a new version with index entries of its own (after a HOT
		 * update the key's index entry, and what is remembered, still point
		 * to the chain's root).
		 */
		bool moved = false;
		if (!inserted)
			for (;;) {
				if (FindRowPg(&tw.finder, newslot, localslot)) {
					if (UpdateFoundRowPg(rri, estate, localslot, newslot, &moved))
						break;
				} else if (InsertMissingRowPg(&tw.w, tw.index, newslot)) {
					inserted = true;
					break;
				}
			}
		if (inserted || moved)
			NoteRowLocationPg(&tw.finder.loc, newslot);
		ResetPerTupleExprContext(estate);
	}
	EndTargetWritePg(&tw);
	return true;
}

/*
 * nkeys x nkey key Datums (row-major, key columns `key`); found[i] and,
 * with `jsonb`, jsonb[i] (allocated in `out_cxt`) per key.
 */
bool
FindRowsDirectPg(Oid relid, const AttrNumber *key, const Oid *key_types, const int32 *key_typmods, int nkey, int nkeys,
                 const Datum *values, const bool *nulls, bool remove, MemoryContext out_cxt, Datum *jsonb, bool *found)
{
	TargetWrite tw;
	if (!BeginTargetWritePg(relid, key, nkey, ACL_SELECT | (remove ? ACL_DELETE : ACL_UPDATE),
	                        DirectColumns{key, key_types, key_typmods, nkey}, &tw))
		return false;
	Relation rel = tw.rel;
	Oid index = tw.index;
	EState *estate = tw.w.estate;
	TupleDesc desc = RelationGetDescr(rel);
	TupleTableSlot *searchslot = ExecInitExtraTupleSlot(estate, desc, &TTSOpsVirtual);
	TupleTableSlot *localslot = table_slot_create(rel, &estate->es_tupleTable);
	for (int r = 0; r < nkeys; r++) {
		NoteApplyProgressPg(); /* the worker's source keepalive, rate-limited (engine.hpp) */
		ExecClearTuple(searchslot);
		for (int i = 0; i < desc->natts; i++) {
			searchslot->tts_values[i] = (Datum) 0;
			searchslot->tts_isnull[i] = true;
		}
		for (int k = 0; k < nkey; k++) {
			searchslot->tts_values[key[k] - 1] = values[size_t(r) * size_t(nkey) + size_t(k)];
			searchslot->tts_isnull[key[k] - 1] = nulls[size_t(r) * size_t(nkey) + size_t(k)];
		}
		ExecStoreVirtualTuple(searchslot);
		for (;;) {
			/*
			 * Read: the row locked, as the chain's write that follows in the
			 * batch would lock it.  Removed: found unlocked and deleted; one
			 * another transaction changed since it was found is looked up
			 * again (and its payload read again).
			 */
			found[r] = remove ? FindRowPg(&tw.finder, searchslot, localslot)
			                  : RelationFindReplTupleByIndex(rel, index, LockTupleExclusive, searchslot, localslot);
			if (found[r] && jsonb != NULL) {
				MemoryContext old = MemoryContextSwitchTo(out_cxt);
				jsonb[r] = RowJsonbPg(localslot);
				MemoryContextSwitchTo(old);
			}
			if (!found[r] || !remove)
				break;
			if (DeleteFoundRowPg(tw.w.rri, estate, localslot)) {
				ForgetRowLocationPg(&tw.finder);
				break;
			}
			if (jsonb != NULL) {
				pfree(DatumGetPointer(jsonb[r]));
				jsonb[r] = (Datum) 0;
			}
		}
		ResetPerTupleExprContext(estate);
	}
	EndTargetWritePg(&tw);
	return true;
}

} // namespace

void
RefuseApplyDuringSpeculativeInsertionPg()
{
	if (!OidIsValid(speculative_insertion_rel))
		return;
	const char *name = get_rel_name(speculative_insertion_rel);
	ereport(ERROR,
	        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
	         errmsg("cdc_apply cannot apply changes while it is inserting a row of table \"%s\"",
	                name != NULL ? name : "?"),
	         errdetail("The call comes from code that inserting the row runs: an index expression or predicate, or an "
	                   "operator class of that table's indexes."),
	         errhint("Apply the change from a trigger, or after the statement.")));
}

/*
 * The backend's row location cache (core/location_cache.hpp): its storage
 * in TopMemoryContext, allocated on first use and again when
 * cdc.row_location_cache changes.  Plain pointers (trivial destructors).
 */
static cdc::LocationCache *row_locations = nullptr;
static int row_locations_kb = -1; /* the setting the cache was sized for */

/* The cache as cdc.row_location_cache sizes it now; NULL when it is 0 or its memory is not there. */
static cdc::LocationCache *
RowLocationsPg()
{
	if (row_locations_kb != cdc_row_location_cache) {
		if (row_locations != nullptr)
			pfree(row_locations);
		row_locations = nullptr;
		row_locations_kb = cdc_row_location_cache;
		const size_t capacity = cdc::LocationCache::CapacityFor(size_t(cdc_row_location_cache) * 1024);
		if (capacity > 0) {
			/* without the memory the engine finds rows through the index, as with the setting 0 */
			void *mem = MemoryContextAllocExtended(TopMemoryContext,
			                                       sizeof(cdc::LocationCache) + capacity * sizeof(cdc::LocationCache::Entry),
			                                       MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM | MCXT_ALLOC_ZERO);
			if (mem != NULL) {
				auto *entries = reinterpret_cast<cdc::LocationCache::Entry *>(static_cast<char *>(mem) +
				                                                               sizeof(cdc::LocationCache));
				row_locations = new (mem) cdc::LocationCache(entries, capacity);
			}
		}
	}
	return row_locations;
}

/*
 * May rows found through `index` be remembered by location?  Only where a
 * visible tuple whose key equals the one looked for is the one row the
 * index scan would find: a unique index checked at once (a deferrable one
 * may hold two rows of a key until commit), on columns (no expression),
 * without a predicate (a row outside it is not in the index), of a heap
 * table (TIDs as heapam makes them).
 */
static bool
RowLocationsUsablePg(Relation rel, Relation index)
{
	Form_pg_index ix = index->rd_index;
	if (!ix->indisunique || !ix->indimmediate || rel->rd_rel->relkind != RELKIND_RELATION ||
	    rel->rd_rel->relam != HEAP_TABLE_AM_OID)
		return false;
	if (!heap_attisnull(index->rd_indextuple, Anum_pg_index_indexprs, NULL) ||
	    !heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, NULL))
		return false;
	for (int j = 0; j < IndexRelationGetNumberOfKeyAttributes(index); j++)
		if (ix->indkey.values[j] <= 0)
			return false;
	return true;
}

/*
 * The tag of the key values of `s` (by k's heap attribute numbers): a hash
 * of the relation (k->seed) and each value's bytes; false for a key the
 * cache does not serve (a NULL, or a compressed or out-of-line value,
 * whose bytes are not the value's).
 */
static bool
KeyTagPg(const RowLocationKeys *k, TupleTableSlot *s, uint64 *tag)
{
	TupleDesc desc = s->tts_tupleDescriptor;
	uint64 h = k->seed;
	for (int j = 0; j < k->nkeys; j++) {
		const AttrNumber a = k->heap_attno[j];
		if (s->tts_isnull[a - 1])
			return false;
		const Datum d = s->tts_values[a - 1];
		Form_pg_attribute att = TupleDescAttr(desc, a - 1);
		if (att->attbyval) {
			h = hash_bytes_extended(reinterpret_cast<const unsigned char *>(&d), sizeof(Datum), h);
		} else if (att->attlen == -1) {
			struct varlena *v = reinterpret_cast<struct varlena *>(DatumGetPointer(d));
			if (VARATT_IS_EXTERNAL(v) || VARATT_IS_COMPRESSED(v))
				return false;
			h = hash_bytes_extended(reinterpret_cast<const unsigned char *>(VARDATA_ANY(v)), int(VARSIZE_ANY_EXHDR(v)), h);
		} else if (att->attlen == -2) {
			const char *c = DatumGetCString(d);
			h = hash_bytes_extended(reinterpret_cast<const unsigned char *>(c), int(strlen(c)), h);
		} else {
			h = hash_bytes_extended(reinterpret_cast<const unsigned char *>(DatumGetPointer(d)), att->attlen, h);
		}
		h = hash_combine64(h, uint64(j + 1));
	}
	*tag = h;
	return true;
}

void
BeginRowLocationKeysPg(Relation rel, Relation index, RowLocationKeys *k)
{
	k->nkeys = 0;
	k->on = index != NULL && RowLocationsPg() != nullptr && RowLocationsUsablePg(rel, index);
	if (index == NULL)
		return;
	k->nkeys = IndexRelationGetNumberOfKeyAttributes(index);
	for (int j = 0; j < k->nkeys; j++)
		k->heap_attno[j] = index->rd_index->indkey.values[j];
	if (!k->on)
		return;
	/* the relation's file, not its OID: a rewrite (TRUNCATE, VACUUM FULL, CLUSTER) starts over */
	const RelFileNode &node = rel->rd_node;
	uint32 parts[4] = {node.spcNode, node.dbNode, node.relNode, RelationGetRelid(index)};
	k->seed = hash_bytes_extended(reinterpret_cast<const unsigned char *>(parts), int(sizeof(parts)), 0);
}

void
NoteRowLocationPg(const RowLocationKeys *k, TupleTableSlot *row)
{
	cdc::LocationCache *cache = k->on ? RowLocationsPg() : nullptr;
	uint64 tag;
	if (cache == nullptr || !ItemPointerIsValid(&row->tts_tid) || !KeyTagPg(k, row, &tag))
		return;
	cache->Put(tag, cdc::RowLocation{ItemPointerGetBlockNumber(&row->tts_tid), ItemPointerGetOffsetNumber(&row->tts_tid)});
}

/*
 * The row at the remembered location `tid` into `out`, when it is the row
 * of the key of `search`: the tuple visible to the finder's snapshot at
 * the chain rooted there, committed and written by no other transaction
 * (one that is: the index scan waits for it), whose key columns equal
 * those of `search` under the index's equality operators and collations.
 */
/*
 * The number of blocks of `rel`'s heap as this backend may take it for a
 * remembered location in `block`: a size measured earlier in this
 * subtransaction when it covers `block`, else measured now (an lseek, which
 * was the largest single cost of the row location cache in a call of
 * cdc_apply(): docs/benchmarks.md, thirty-second round).
 *
 * A size measured earlier is a lower bound as long as this backend holds a
 * lock on the relation: blocks are only added, except by VACUUM's
 * truncation, which needs ACCESS EXCLUSIVE (lazy_truncate_heap), and by
 * TRUNCATE of a relation this transaction created or gave a new file, which
 * truncates that file in place (heap_truncate_one_rel).  So a size is kept
 * (a) per subtransaction: the caller opened the relation with a lock taken
 * in this subtransaction or an enclosing one, which stays until it ends,
 * while a lock taken in a subtransaction that was rolled back is gone, and
 * a VACUUM may since have truncated the heap (isolation spec
 * row_location_truncate); (b) per file (rd_node); (c) never for a relation
 * created or given a new file in this transaction.
 */
static BlockNumber
HeapBlocksForPg(Relation rel, BlockNumber block)
{
	/* plain data, a few relations per call: a write opens the target and the bookkeeping tables */
	struct KnownSize {
		Oid relid;
		RelFileNode node;
		LocalTransactionId lxid;
		SubTransactionId subid;
		BlockNumber nblocks;
	};
	static KnownSize known[8];
	static int next;
	const bool keep = rel->rd_createSubid == InvalidSubTransactionId &&
	                  rel->rd_firstRelfilenodeSubid == InvalidSubTransactionId;
	const LocalTransactionId lxid = MyProc->lxid;
	const SubTransactionId subid = GetCurrentSubTransactionId();
	KnownSize *k = NULL;
	for (KnownSize &e : known)
		if (e.relid == RelationGetRelid(rel) && RelFileNodeEquals(e.node, rel->rd_node) && e.lxid == lxid &&
		    e.subid == subid) {
			k = &e;
			break;
		}
	if (keep && k != NULL && block < k->nblocks)
		return k->nblocks;
	const BlockNumber nblocks = RelationGetNumberOfBlocks(rel);
	if (keep) {
		if (k == NULL) {
			k = &known[next];
			next = (next + 1) % int(lengthof(known));
		}
		*k = KnownSize{RelationGetRelid(rel), rel->rd_node, lxid, subid, nblocks};
	}
	return nblocks;
}

static bool
FetchRememberedRowPg(RowFinder *f, ItemPointer tid, TupleTableSlot *search, TupleTableSlot *out)
{
	/* a location past the end of the heap (truncated by VACUUM since) is not fetched: reading it would fail */
	if (ItemPointerGetBlockNumber(tid) >= f->nblocks)
		f->nblocks = HeapBlocksForPg(f->scan->heapRelation, ItemPointerGetBlockNumber(tid));
	if (ItemPointerGetBlockNumber(tid) >= f->nblocks)
		return false;
	bool call_again = false, all_dead = false;
	if (!table_index_fetch_tuple(f->fetch, tid, f->snapshot, out, &call_again, &all_dead))
		return false;
	if (f->wait && (TransactionIdIsValid(f->dirty.xmin) || TransactionIdIsValid(f->dirty.xmax))) {
		ExecClearTuple(out);
		return false;
	}
	for (int j = 0; j < f->loc.nkeys; j++) {
		const AttrNumber a = f->loc.heap_attno[j];
		bool isnull;
		const Datum v = slot_getattr(out, a, &isnull);
		if (isnull || !DatumGetBool(FunctionCall2Coll(&f->skey[j].sk_func, f->skey[j].sk_collation, v,
		                                                search->tts_values[a - 1]))) {
			ExecClearTuple(out);
			return false;
		}
	}
	return true;
}

void
ForgetRowLocationPg(RowFinder *f)
{
	cdc::LocationCache *cache = f->fetch != NULL && f->tag_ok ? RowLocationsPg() : nullptr;
	if (cache != nullptr)
		cache->Forget(f->tag);
}

void
BeginRowFinderPg(RowFinder *f, Relation rel, Oid indexoid, Snapshot snapshot)
{
	f->index = index_open(indexoid, RowExclusiveLock);
	/* the key columns (f->loc.nkeys, f->loc.heap_attno), and whether the row location cache serves the index */
	BeginRowLocationKeysPg(rel, f->index, &f->loc);
	for (int j = 0; j < f->loc.nkeys; j++) {
		/* the equality of the key column's operator class, compared in the index's collation */
		Oid opfamily = f->index->rd_opfamily[j];
		Oid optype = f->index->rd_opcintype[j];
		Oid eq = get_opfamily_member(opfamily, optype, optype, BTEqualStrategyNumber);
		if (!OidIsValid(eq))
			elog(ERROR, "missing equality operator for the type %u of index column %d of \"%s\"", optype, j + 1,
			     RelationGetRelationName(f->index));
		ScanKeyInit(&f->skey[j], AttrNumber(j + 1), BTEqualStrategyNumber, get_opcode(eq), (Datum) 0);
		f->skey[j].sk_collation = f->index->rd_indcollation[j];
	}
	InitDirtySnapshot(f->dirty);
	f->wait = snapshot == NULL;
	f->cxt = CurrentMemoryContext;
	f->snapshot = f->wait ? &f->dirty : snapshot;
	f->scan = index_beginscan(rel, f->index, f->snapshot, f->loc.nkeys, 0);
	f->tag_ok = false;
	f->fetch = NULL;
	f->nblocks = 0; /* measured when a remembered location needs it (HeapBlocksForPg) */
	if (f->loc.on)
		f->fetch = table_index_fetch_begin(rel);
}

void
EndRowFinderPg(RowFinder *f)
{
	if (f->fetch != NULL)
		table_index_fetch_end(f->fetch);
	index_endscan(f->scan);
	index_close(f->index, NoLock);
}

bool
FindRowPg(RowFinder *f, TupleTableSlot *search, TupleTableSlot *out)
{
	for (int j = 0; j < f->loc.nkeys; j++) {
		AttrNumber a = f->loc.heap_attno[j];
		f->skey[j].sk_argument = search->tts_values[a - 1];
		/* a NULL key matches no row, as RelationFindReplTupleByIndex's key */
		if (search->tts_isnull[a - 1])
			f->skey[j].sk_flags |= SK_ISNULL;
		else
			f->skey[j].sk_flags &= ~SK_ISNULL;
	}
	/*
	 * In the scan's context: the index AM allocates state on first need
	 * (btree's killed-items array) that must live as long as the scan, not
	 * as long as the caller's per-row context.
	 */
	MemoryContext caller = MemoryContextSwitchTo(f->cxt);
	cdc::LocationCache *cache = f->fetch != NULL ? RowLocationsPg() : nullptr;
	f->tag_ok = cache != nullptr && KeyTagPg(&f->loc, search, &f->tag);
	cdc::RowLocation loc;
	if (f->tag_ok && cache->Get(f->tag, &loc)) {
		ItemPointerData tid;
		ItemPointerSet(&tid, loc.block, loc.offset);
		if (FetchRememberedRowPg(f, &tid, search, out)) {
			ExecMaterializeSlot(out);
			MemoryContextSwitchTo(caller);
			return true;
		}
	}
	bool found;
	ItemPointerData root;
	ItemPointerSetInvalid(&root);
	for (;;) {
		index_rescan(f->scan, f->skey, f->loc.nkeys, NULL, 0);
		/*
		 * index_getnext_slot, with the index entry's TID kept: the HOT
		 * chain's root, which is what is remembered.  The fetch overwrites
		 * xs_heaptid with the visible version's TID, a heap-only tuple after
		 * a HOT update, from which no later fetch could start (review h3,
		 * regress row_location_hot_chain).
		 */
		found = false;
		for (;;) {
			if (!f->scan->xs_heap_continue) {
				ItemPointer tid = index_getnext_tid(f->scan, ForwardScanDirection);
				if (tid == NULL)
					break;
				root = *tid;
			}
			if (index_fetch_heap(f->scan, out)) {
				found = true;
				break;
			}
		}
		if (!found)
			break;
		ExecMaterializeSlot(out);
		if (!f->wait)
			break;
		TransactionId xwait = TransactionIdIsValid(f->dirty.xmin) ? f->dirty.xmin : f->dirty.xmax;
		if (!TransactionIdIsValid(xwait))
			break;
		XactLockTableWait(xwait, NULL, NULL, XLTW_None);
	}
	/*
	 * The index entry's TID is the root of the row's HOT chain, where the
	 * next look-up starts.  The cache is fetched again: the scan ran the
	 * index's operators, user code that may have changed the setting and
	 * applied changes itself, which reallocates the cache.
	 */
	cache = found && f->tag_ok && ItemPointerIsValid(&root) ? RowLocationsPg() : nullptr;
	if (cache != nullptr)
		cache->Put(f->tag, cdc::RowLocation{ItemPointerGetBlockNumber(&root), ItemPointerGetOffsetNumber(&root)});
	MemoryContextSwitchTo(caller);
	return found;
}

bool
RowWrittenPg(TM_Result r)
{
	switch (r) {
	case TM_Ok:
		return true;
	case TM_Updated:
	case TM_Deleted:
		return false;
	case TM_SelfModified:
		elog(ERROR, "tuple already updated by self");
		break;
	default:
		elog(ERROR, "unrecognized table_tuple_update/delete status: %u", r);
		break;
	}
	return false;
}

bool
UpdateRowAtPg(ResultRelInfo *rri, EState *estate, ItemPointer tid, TupleTableSlot *slot, bool *moved)
{
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	bool update_indexes = false;
	if (!RowWrittenPg(table_tuple_update(rri->ri_RelationDesc, tid, slot, GetCurrentCommandId(true), estate->es_snapshot,
	                                     InvalidSnapshot, true /* wait */, &tmfd, &lockmode, &update_indexes)))
		return false;
	if (rri->ri_NumIndices > 0 && update_indexes)
		list_free(ExecInsertIndexTuples(rri, slot, estate, true, false, NULL, NIL));
	if (moved != nullptr)
		*moved = update_indexes;
	return true;
}

void
BeginExecWritePg(Relation rel, AclMode perms, ExecWrite *w, bool speculative)
{
	w->estate = CreateExecutorState();
	w->caller_cxt = MemoryContextSwitchTo(w->estate->es_query_cxt);
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	rte->requiredPerms = perms;
	ExecInitRangeTable(w->estate, list_make1(rte));
	w->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(w->rri, rel, 1, NULL, 0);
	ExecOpenIndices(w->rri, speculative);
	w->estate->es_output_cid = GetCurrentCommandId(true);
}

Relation
OpenedIndexPg(const ExecWrite *w, Oid index, IndexInfo **info)
{
	for (int k = 0; k < w->rri->ri_NumIndices; k++)
		if (RelationGetRelid(w->rri->ri_IndexRelationDescs[k]) == index) {
			if (info != nullptr)
				*info = w->rri->ri_IndexRelationInfo[k];
			return w->rri->ri_IndexRelationDescs[k];
		}
	return NULL;
}

void
EndExecWritePg(ExecWrite *w)
{
	ExecCloseIndices(w->rri);
	MemoryContextSwitchTo(w->caller_cxt);
	FreeExecutorState(w->estate);
	w->estate = nullptr;
	CommandCounterIncrement();
}

namespace {

/*
 * Is the arbiter key of the row in `slot` (stored at slot->tts_tid) held by
 * another row, committed or of this transaction?  Waits for an uncommitted
 * row of another transaction and looks again (as
 * check_exclusion_or_unique_constraint in execIndexing.c, CEOUC_WAIT).
 * `ii` is the arbiter's IndexInfo, built for speculative insertion (its
 * equality procedures).
 */
bool
KeyTakenByAnotherRowPg(ExecWrite *w, Relation idx, IndexInfo *ii, TupleTableSlot *slot)
{
	Relation rel = w->rri->ri_RelationDesc;
	Datum values[INDEX_MAX_KEYS];
	bool isnull[INDEX_MAX_KEYS];
	ExprContext *econtext = GetPerTupleExprContext(w->estate);
	TupleTableSlot *saved = econtext->ecxt_scantuple;
	econtext->ecxt_scantuple = slot;
	FormIndexDatum(ii, slot, w->estate, values, isnull);
	econtext->ecxt_scantuple = saved;
	const int nkeys = ii->ii_NumIndexKeyAttrs;
	if (!ii->ii_NullsNotDistinct)
		for (int i = 0; i < nkeys; i++)
			if (isnull[i])
				return false; /* a NULL never conflicts */
	ScanKeyData skeys[INDEX_MAX_KEYS];
	for (int i = 0; i < nkeys; i++)
		ScanKeyEntryInitialize(&skeys[i], isnull[i] ? SK_ISNULL | SK_SEARCHNULL : 0, AttrNumber(i + 1),
		                       ii->ii_UniqueStrats[i], InvalidOid, idx->rd_indcollation[i], ii->ii_UniqueProcs[i],
		                       values[i]);
	TupleTableSlot *existing = table_slot_create(rel, NULL);
	bool taken = false;
	for (;;) {
		CHECK_FOR_INTERRUPTS();
		SnapshotData dirty;
		InitDirtySnapshot(dirty);
		IndexScanDesc scan = index_beginscan(rel, idx, &dirty, nkeys, 0);
		index_rescan(scan, skeys, nkeys, NULL, 0);
		TransactionId xwait = InvalidTransactionId;
		ItemPointerData wait_tid;
		uint32 token = 0;
		while (index_getnext_slot(scan, ForwardScanDirection, existing)) {
			if (ItemPointerEquals(&existing->tts_tid, &slot->tts_tid))
				continue; /* our own new row */
			xwait = TransactionIdIsValid(dirty.xmin) ? dirty.xmin : dirty.xmax;
			if (TransactionIdIsValid(xwait)) {
				wait_tid = existing->tts_tid;
				token = dirty.speculativeToken;
				break;
			}
			taken = true;
			break;
		}
		index_endscan(scan);
		if (!TransactionIdIsValid(xwait))
			break;
		if (token != 0)
			SpeculativeInsertionWait(dirty.xmin, token);
		else
			XactLockTableWait(xwait, rel, &wait_tid, XLTW_InsertIndex);
	}
	ExecDropSingleTupleTableSlot(existing);
	return taken;
}

} // namespace

int
InsertSkippingTakenKeysPg(ExecWrite *w, TupleTableSlot **slots, int n, Oid arbiter_index, bool precheck,
                          char *inserted)
{
	Relation rel = w->rri->ri_RelationDesc;
	List *arbiter = list_make1_oid(arbiter_index);
	IndexInfo *ii = NULL;
	Relation idx = OpenedIndexPg(w, arbiter_index, &ii);
	if (idx == NULL || ii->ii_UniqueProcs == NULL)
		elog(ERROR, "arbiter index %u is not open for speculative insertion", arbiter_index);
	/* the rows that go in (all, without `precheck`), and where they are in slots[] */
	TupleTableSlot **go = slots;
	int *at = NULL;
	int m = n;
	if (precheck) {
		go = (TupleTableSlot **) palloc(sizeof(TupleTableSlot *) * size_t(n));
		at = (int *) palloc(sizeof(int) * size_t(n));
		m = 0;
		for (int j = 0; j < n; j++) {
			ItemPointerData conflict_tid;
			inserted[j] = 0;
			if (ExecCheckIndexConstraints(w->rri, slots[j], w->estate, &conflict_tid, arbiter)) {
				go[m] = slots[j];
				at[m++] = j;
			}
		}
	}
	if (m > 0)
		table_multi_insert(rel, go, m, w->estate->es_output_cid, 0, NULL);
	int count = 0;
	for (int i = 0; i < m; i++) {
		NoteApplyProgressPg(); /* the worker's source keepalive, rate-limited (engine.hpp) */
		const int j = at != NULL ? at[i] : i;
		bool conflict = false;
		List *recheck = ExecInsertIndexTuples(w->rri, go[i], w->estate, false, true, &conflict, arbiter);
		list_free(recheck);
		bool taken = conflict && KeyTakenByAnotherRowPg(w, idx, ii, go[i]);
		if (taken) {
			/*
			 * Delete the new row again: the command counter moves on so that
			 * heap_delete sees it (inserted by an earlier command); the
			 * arbiter's entry for it stays, dead, for VACUUM, as after an
			 * aborted INSERT.
			 */
			CommandCounterIncrement();
			simple_table_tuple_delete(rel, &go[i]->tts_tid, w->estate->es_snapshot);
		}
		inserted[j] = taken ? 0 : 1;
		count += taken ? 0 : 1;
	}
	if (precheck) {
		pfree(go);
		pfree(at);
	}
	list_free(arbiter);
	return count;
}

bool
UpsertRowsDirect(const Target &t, const std::vector<const Image *> &images, const RunAs &as,
                 const std::vector<char> *absent)
{
	if (!cdc_direct_writes)
		return false;
	std::vector<AttrNumber> key, attnums;
	std::vector<Oid> types;
	std::vector<int32> typmods;
	for (int k : t.key)
		key.push_back(t.columns[size_t(k)].attnum);
	std::vector<size_t> cols;
	for (size_t c = 0; c < t.columns.size(); c++)
		if (!t.columns[c].generated) {
			cols.push_back(c);
			attnums.push_back(t.columns[c].attnum);
			types.push_back(t.columns[c].type);
			typmods.push_back(t.columns[c].typmod);
		}
	std::vector<Datum> values;
	std::unique_ptr<bool[]> nulls(new bool[images.size() * cols.size() + 1]);
	values.reserve(images.size() * cols.size());
	size_t n = 0;
	for (const Image *img : images) {
		img->RequireComplete();
		for (size_t c : cols) {
			const Cell &cell = img->cells[c];
			values.push_back(cell.isnull ? (Datum) 0 : cell.value);
			nulls[n++] = cell.isnull;
		}
	}
	return PgCallAs(as, [&]() {
		return UpsertRowsDirectPg(t.relid, key.data(), int(key.size()), attnums.data(), types.data(), typmods.data(),
		                          int(attnums.size()),
		                          int(images.size()), values.data(), nulls.get(),
		                          absent != nullptr && absent->size() == images.size() ? absent->data() : nullptr);
	});
}

bool
FindRowsDirect(const Target &t, const std::vector<const Image *> &keys, bool remove,
               std::vector<std::optional<Datum>> *rows, const RunAs &as)
{
	if (!cdc_direct_writes || keys.empty())
		return false;
	const size_t nkey = t.key.size();
	std::vector<AttrNumber> key;
	std::vector<Oid> key_types;
	std::vector<int32> key_typmods;
	for (int k : t.key) {
		key.push_back(t.columns[size_t(k)].attnum);
		key_types.push_back(t.columns[size_t(k)].type);
		key_typmods.push_back(t.columns[size_t(k)].typmod);
	}
	std::vector<Datum> values;
	std::unique_ptr<bool[]> nulls(new bool[keys.size() * nkey + 1]);
	values.reserve(keys.size() * nkey);
	size_t n = 0;
	for (const Image *img : keys)
		for (int k : t.key) {
			const Cell &cell = img->cells[size_t(k)];
			values.push_back(cell.isnull ? (Datum) 0 : cell.value);
			nulls[n++] = cell.isnull;
		}
	std::unique_ptr<bool[]> found(new bool[keys.size()]);
	std::vector<Datum> jsonb(rows != nullptr ? keys.size() : 0);
	MemoryContext out_cxt = CurrentMemoryContext;
	bool done = PgCallAs(as, [&]() {
		return FindRowsDirectPg(t.relid, key.data(), key_types.data(), key_typmods.data(), int(nkey), int(keys.size()), values.data(), nulls.get(), remove,
		                        out_cxt, rows != nullptr ? jsonb.data() : nullptr, found.get());
	});
	if (done && rows != nullptr) {
		rows->assign(keys.size(), std::nullopt);
		for (size_t i = 0; i < keys.size(); i++)
			if (found[i])
				(*rows)[i] = jsonb[i];
	}
	return done;
}

} // namespace cdc::pg
