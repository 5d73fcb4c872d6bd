// Target rows written without SQL: see table_write.hpp.
//
// Glue: UpsertRowsDirectPg is PostgreSQL regime (plain data, called only
// through PgCallAs); UpsertRowsDirect lays the images out for it.
#include "pg/apply/table_write.hpp"

#include <memory>

extern "C" {
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
}

namespace cdc::pg {

namespace {

/*
 * The unique index whose key columns are exactly `key` (in any order), as
 * ON CONFLICT (key) infers it; InvalidOid when there is none, or when it is
 * partial, on expressions or not yet valid.
 */
Oid
KeyIndexPg(Relation rel, const AttrNumber *key, int nkey)
{
	Oid found = InvalidOid;
	List *indexes = RelationGetIndexList(rel);
	ListCell *lc;
	foreach (lc, indexes) {
		HeapTuple tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for index %u", lfirst_oid(lc));
		Form_pg_index idx = (Form_pg_index) GETSTRUCT(tup);
		bool ok = idx->indisunique && idx->indisvalid && idx->indimmediate && idx->indnkeyatts == nkey &&
		          heap_attisnull(tup, Anum_pg_index_indexprs, NULL) && heap_attisnull(tup, Anum_pg_index_indpred, NULL);
		for (int i = 0; ok && i < nkey; i++) {
			bool in = false;
			for (int j = 0; j < nkey; j++)
				in = in || idx->indkey.values[i] == key[j];
			ok = in;
		}
		ReleaseSysCache(tup);
		if (ok) {
			found = lfirst_oid(lc);
			break;
		}
	}
	list_free(indexes);
	return found;
}

/*
 * rows x ncols Datums (row-major) of the columns attnums[0..ncols): every
 * column but the stored generated ones, which the executor computes.
 */
bool
UpsertRowsDirectPg(Oid relid, const AttrNumber *key, int nkey, const AttrNumber *attnums, int ncols, int nrows,
                   const Datum *values, const bool *nulls)
{
	Oid userid = GetUserId();
	AclMode need = ACL_SELECT | ACL_INSERT | ACL_UPDATE;
	if (pg_namespace_aclcheck(get_rel_namespace(relid), userid, ACL_USAGE) != ACLCHECK_OK ||
	    pg_class_aclmask(relid, userid, need, ACLMASK_ALL) != need)
		return false;
	Relation rel = table_open(relid, RowExclusiveLock);
	Oid index = InvalidOid;
	bool plain = rel->rd_rel->relkind == RELKIND_RELATION && rel->trigdesc == NULL && !rel->rd_rel->relhasrules &&
	             !rel->rd_rel->relrowsecurity &&
	             (rel->rd_rel->relreplident == REPLICA_IDENTITY_FULL || OidIsValid(RelationGetReplicaIndex(rel)));
	if (plain)
		index = KeyIndexPg(rel, key, nkey);
	if (!OidIsValid(index)) {
		table_close(rel, NoLock);
		return false;
	}

	PushActiveSnapshot(GetTransactionSnapshot());
	EState *estate = CreateExecutorState();
	MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	rte->rtekind = RTE_RELATION;
	rte->relid = relid;
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	rte->requiredPerms = need;
	ExecInitRangeTable(estate, list_make1(rte));
	ResultRelInfo *rri = makeNode(ResultRelInfo);
	InitResultRelInfo(rri, rel, 1, NULL, 0);
	ExecOpenIndices(rri, false);
	estate->es_output_cid = GetCurrentCommandId(true);
	estate->es_snapshot = GetActiveSnapshot();
	EPQState epq;
	EvalPlanQualInit(&epq, estate, NULL, NIL, -1);

	TupleDesc desc = RelationGetDescr(rel);
	TupleTableSlot *newslot = ExecInitExtraTupleSlot(estate, desc, &TTSOpsVirtual);
	TupleTableSlot *localslot = table_slot_create(rel, &estate->es_tupleTable);
	for (int r = 0; r < nrows; r++) {
		MemoryContextSwitchTo(GetPerTupleMemoryContext(estate));
		ExecClearTuple(newslot);
		for (int i = 0; i < desc->natts; i++) {
			newslot->tts_values[i] = (Datum) 0;
			newslot->tts_isnull[i] = true;
		}
		for (int c = 0; c < ncols; c++) {
			newslot->tts_values[attnums[c] - 1] = values[size_t(r) * size_t(ncols) + size_t(c)];
			newslot->tts_isnull[attnums[c] - 1] = nulls[size_t(r) * size_t(ncols) + size_t(c)];
		}
		ExecStoreVirtualTuple(newslot);
		if (RelationFindReplTupleByIndex(rel, index, LockTupleExclusive, newslot, localslot))
			ExecSimpleRelationUpdate(rri, estate, &epq, localslot, newslot);
		else
			ExecSimpleRelationInsert(rri, estate, newslot);
		EvalPlanQualSetSlot(&epq, NULL);
		ResetPerTupleExprContext(estate);
	}
	MemoryContextSwitchTo(old);
	EvalPlanQualEnd(&epq);
	ExecCloseIndices(rri);
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
	PopActiveSnapshot();
	table_close(rel, NoLock);
	CommandCounterIncrement();
	return true;
}

} // namespace

bool
UpsertRowsDirect(const Target &t, const std::vector<const Image *> &images, const RunAs &as)
{
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
	for (const Image *img : images)
		for (size_t c : cols) {
			const Cell &cell = img->cells[c];
			values.push_back(cell.isnull ? (Datum) 0 : cell.value);
			nulls[n++] = cell.isnull;
		}
	return PgCallAs(as, [&]() {
		return UpsertRowsDirectPg(t.relid, key.data(), int(key.size()), attnums.data(), int(attnums.size()),
		                          int(images.size()), values.data(), nulls.get());
	});
}

} // namespace cdc::pg
