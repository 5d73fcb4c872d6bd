// Target rows written without SQL: see table_write.hpp.
//
// Glue: UpsertRowsDirectPg is PostgreSQL regime (plain data, called only
// through PgCallAs); UpsertRowsDirect lays the images out for it.
#include "pg/apply/table_write.hpp"

#include "pg/apply/outbox.hpp"
#include "pg/apply/target.hpp"
#include "pg/guc.hpp"

#include <memory>

extern "C" {
#include "access/genam.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
}

namespace cdc::pg {

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
 * statement's DELETE FROM t also removes a child's row of the key, the
 * index of t alone finds none); no replica identity for UPDATE and DELETE
 * (CheckCmdReplicaIdentity); no such index, or one comparing the key with
 * another collation or equality than the statement's).
 */
Relation
OpenDirectTargetPg(Oid relid, const AttrNumber *key, int nkey, AclMode need, Oid *index)
{
	*index = InvalidOid;
	if (!DirectTargetWritesAllowedPg())
		return NULL;
	Oid userid = GetUserId();
	if (pg_namespace_aclcheck(get_rel_namespace(relid), userid, ACL_USAGE) != ACLCHECK_OK ||
	    pg_class_aclmask(relid, userid, need, ACLMASK_ALL) != need)
		return NULL;
	Relation rel = table_open(relid, RowExclusiveLock);
	bool plain = rel->rd_rel->relkind == RELKIND_RELATION && rel->trigdesc == NULL && !rel->rd_rel->relhasrules &&
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
 * A target write that finds rows by index and updates or deletes them: the
 * target opened by OpenDirectTargetPg, the transaction snapshot as the
 * active one (for the index scans), the executor state and an EPQ state for
 * ExecSimpleRelationUpdate/Delete.  Plain data (PostgreSQL regime).
 */
struct TargetWrite {
	Relation rel;
	Oid index;
	ExecWrite w;
	EPQState epq;
};

/* false, with nothing open, where OpenDirectTargetPg declines */
bool
BeginTargetWritePg(Oid relid, const AttrNumber *key, int nkey, AclMode need, TargetWrite *tw)
{
	tw->rel = OpenDirectTargetPg(relid, key, nkey, need, &tw->index);
	if (tw->rel == NULL)
		return false;
	PushActiveSnapshot(GetTransactionSnapshot());
	BeginExecWritePg(tw->rel, need, &tw->w);
	tw->w.estate->es_snapshot = GetActiveSnapshot();
	EvalPlanQualInit(&tw->epq, tw->w.estate, NULL, NIL, -1);
	return true;
}

/* Ends it and closes the target (its lock is kept to the end of the transaction). */
void
EndTargetWritePg(TargetWrite *tw)
{
	EvalPlanQualEnd(&tw->epq);
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
UpsertRowsDirectPg(Oid relid, const AttrNumber *key, int nkey, const AttrNumber *attnums, int ncols, int nrows,
                   const Datum *values, const bool *nulls)
{
	TargetWrite tw;
	if (!BeginTargetWritePg(relid, key, nkey, ACL_SELECT | ACL_INSERT | ACL_UPDATE, &tw))
		return false;
	Relation rel = tw.rel;
	Oid index = tw.index;
	EState *estate = tw.w.estate;
	ResultRelInfo *rri = tw.w.rri;
	EPQState *epq = &tw.epq;

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
	for (int r = 0; r < nrows; r++) {
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
		 * RelationFindReplTupleByIndex reads the key from tts_values.
		 */
		MemoryContext per_tuple = MemoryContextSwitchTo(estate->es_query_cxt);
		HeapTuple row = heap_form_tuple(desc, row_values, row_nulls);
		MemoryContextSwitchTo(per_tuple);
		ExecStoreHeapTuple(row, newslot, true);
		slot_getallattrs(newslot);
		if (RelationFindReplTupleByIndex(rel, index, LockTupleExclusive, newslot, localslot))
			ExecSimpleRelationUpdate(rri, estate, epq, localslot, newslot);
		else
			ExecSimpleRelationInsert(rri, estate, newslot);
		EvalPlanQualSetSlot(epq, NULL);
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
FindRowsDirectPg(Oid relid, const AttrNumber *key, int nkey, int nkeys, const Datum *values, const bool *nulls,
                 bool remove, MemoryContext out_cxt, Datum *jsonb, bool *found)
{
	TargetWrite tw;
	if (!BeginTargetWritePg(relid, key, nkey, ACL_SELECT | (remove ? ACL_DELETE : ACL_UPDATE), &tw))
		return false;
	Relation rel = tw.rel;
	Oid index = tw.index;
	EState *estate = tw.w.estate;
	EPQState *epq = &tw.epq;
	TupleDesc desc = RelationGetDescr(rel);
	TupleTableSlot *searchslot = ExecInitExtraTupleSlot(estate, desc, &TTSOpsVirtual);
	TupleTableSlot *localslot = table_slot_create(rel, &estate->es_tupleTable);
	for (int r = 0; r < nkeys; r++) {
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
		found[r] = RelationFindReplTupleByIndex(rel, index, LockTupleExclusive, searchslot, localslot);
		if (found[r] && jsonb != NULL) {
			MemoryContext old = MemoryContextSwitchTo(out_cxt);
			jsonb[r] = RowJsonbPg(localslot);
			MemoryContextSwitchTo(old);
		}
		if (found[r] && remove) {
			ExecSimpleRelationDelete(tw.w.rri, estate, epq, localslot);
			EvalPlanQualSetSlot(epq, NULL);
		}
		ResetPerTupleExprContext(estate);
	}
	EndTargetWritePg(&tw);
	return true;
}

} // namespace

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
	Relation idx = NULL;
	IndexInfo *ii = NULL;
	for (int k = 0; k < w->rri->ri_NumIndices; k++)
		if (RelationGetRelid(w->rri->ri_IndexRelationDescs[k]) == arbiter_index) {
			idx = w->rri->ri_IndexRelationDescs[k];
			ii = w->rri->ri_IndexRelationInfo[k];
		}
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
UpsertRowsDirect(const Target &t, const std::vector<const Image *> &images, const RunAs &as)
{
	if (!cdc_direct_writes)
		return false;
	std::vector<AttrNumber> key, attnums;
	for (int k : t.key)
		key.push_back(t.columns[size_t(k)].attnum);
	std::vector<size_t> cols;
	for (size_t c = 0; c < t.columns.size(); c++)
		if (!t.columns[c].generated) {
			cols.push_back(c);
			attnums.push_back(t.columns[c].attnum);
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
		return UpsertRowsDirectPg(t.relid, key.data(), int(key.size()), attnums.data(), int(attnums.size()),
		                          int(images.size()), values.data(), nulls.get());
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
	for (int k : t.key)
		key.push_back(t.columns[size_t(k)].attnum);
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
		return FindRowsDirectPg(t.relid, key.data(), int(nkey), int(keys.size()), values.data(), nulls.get(), remove,
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
