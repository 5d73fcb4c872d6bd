// The ledger claim and the entity records without SQL: see
// state_direct.hpp.  PostgreSQL regime throughout (plain data, called
// through PgCallAs from state_store.cpp).
#include "pg/apply/state_direct.hpp"

#include "pg/apply/table_write.hpp"
#include "pg/guc.hpp"

extern "C" {
#include "access/genam.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "parser/parse_relation.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
}

namespace cdc::pg {

namespace {

struct ColumnSpec {
	const char *name;
	Oid type;
};

/* The columns of cdc.ledger and cdc.entity_state (sql/cdc_apply--0.2.0.sql), in the order the code fills them. */
const ColumnSpec kLedgerColumns[] = {{"digest", INT8OID}, {"target", REGCLASSOID}, {"claimed_s", INT4OID}};
constexpr int kLedgerColumnCount = int(sizeof(kLedgerColumns) / sizeof(kLedgerColumns[0]));
const ColumnSpec kEntityColumns[] = {{"target", REGCLASSOID}, {"key", TEXTOID},  {"src", INT4OID},
                                     {"v0", INT4OID},         {"v1", INT8OID},   {"v2", INT8OID},
                                     {"v3", INT4OID},         {"deleted", BOOLOID}, {"chash", INT4OID},
                                     {"touched_s", INT4OID}};
constexpr int kEntityColumnCount = int(sizeof(kEntityColumns) / sizeof(kEntityColumns[0]));
enum EntityColumn { E_TARGET, E_KEY, E_SRC, E_V0, E_V1, E_V2, E_V3, E_DELETED, E_CHASH, E_TOUCHED };
/* cdc.prune_watermark, read only: every column, so that a table that gained one is left to the statement */
const ColumnSpec kWatermarkColumns[] = {{"target", REGCLASSOID}, {"src", INT4OID}, {"v0", INT4OID},
                                        {"v1", INT8OID},         {"v2", INT8OID},  {"v3", INT4OID},
                                        {"pruned_at", TIMESTAMPTZOID}};
constexpr int kWatermarkColumnCount = int(sizeof(kWatermarkColumns) / sizeof(kWatermarkColumns[0]));
enum WatermarkColumn { W_TARGET, W_SRC, W_V0, W_V1, W_V2, W_V3 };

/*
 * Opens cdc.<name> (`lockmode`: RowExclusiveLock for a write, as the
 * statement locks it) when a direct write gives what the statement would,
 * filling attno[] with the attribute numbers of cols[]; NULL otherwise
 * (see state_direct.hpp for the conditions).  `need`: the privileges the
 * statement checks, as the current user.
 */
Relation
OpenDirectPg(const char *name, const ColumnSpec *cols, int ncols, AclMode need, AttrNumber *attno,
             LOCKMODE lockmode = RowExclusiveLock)
{
	/* a read-only transaction (or a standby): the statement raises 25006, as ExecCheckXactReadOnly does */
	if (!cdc_direct_writes || IsolationUsesXactSnapshot() || XactReadOnly || IsInParallelMode())
		return NULL;
	Oid nsp = get_namespace_oid("cdc", true);
	Oid relid = OidIsValid(nsp) ? get_relname_relid(name, nsp) : InvalidOid;
	if (!OidIsValid(relid))
		return NULL;
	Oid user = GetUserId();
	if (pg_namespace_aclcheck(nsp, user, ACL_USAGE) != ACLCHECK_OK ||
	    pg_class_aclmask(relid, user, need, ACLMASK_ALL) != need ||
	    check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
		return NULL;
	Relation rel = table_open(relid, lockmode);
	TupleDesc desc = RelationGetDescr(rel);
	bool plain = rel->rd_rel->relkind == RELKIND_RELATION && rel->trigdesc == NULL && !rel->rd_rel->relhasrules &&
	             OidIsValid(RelationGetPrimaryKeyIndex(rel)) &&
	             !(desc->constr != NULL && (desc->constr->num_check > 0 || desc->constr->has_generated_stored));
	int live = 0;
	for (int i = 0; i < desc->natts; i++)
		if (!TupleDescAttr(desc, i)->attisdropped)
			live++;
	plain = plain && live == ncols; /* no column the statement would fill with its default */
	for (int c = 0; plain && c < ncols; c++) {
		attno[c] = attnameAttNum(rel, cols[c].name, false);
		plain = attno[c] > 0 && TupleDescAttr(desc, attno[c] - 1)->atttypid == cols[c].type;
	}
	if (!plain) {
		table_close(rel, NoLock);
		return NULL;
	}
	return rel;
}

/* A slot of rel's row type with every column NULL, to be filled and stored. */
void
ClearToNulls(TupleTableSlot *slot)
{
	ExecClearTuple(slot);
	for (int i = 0; i < slot->tts_tupleDescriptor->natts; i++) {
		slot->tts_values[i] = (Datum) 0;
		slot->tts_isnull[i] = true;
	}
}

void
SetColumn(TupleTableSlot *slot, AttrNumber attno, Datum value)
{
	slot->tts_values[attno - 1] = value;
	slot->tts_isnull[attno - 1] = false;
}

void
FillEntityRow(TupleTableSlot *slot, const AttrNumber *attno, Oid target, Datum key, const EntityRow *row)
{
	ClearToNulls(slot);
	SetColumn(slot, attno[E_TARGET], ObjectIdGetDatum(target));
	SetColumn(slot, attno[E_KEY], key);
	SetColumn(slot, attno[E_SRC], Int32GetDatum(row->src));
	SetColumn(slot, attno[E_V0], Int32GetDatum(row->v0));
	SetColumn(slot, attno[E_V1], Int64GetDatum(row->v1));
	SetColumn(slot, attno[E_V2], Int64GetDatum(row->v2));
	SetColumn(slot, attno[E_V3], Int32GetDatum(row->v3));
	SetColumn(slot, attno[E_DELETED], BoolGetDatum(row->deleted));
	SetColumn(slot, attno[E_CHASH], Int32GetDatum(row->chash));
	SetColumn(slot, attno[E_TOUCHED], Int32GetDatum(row->touched_s));
	ExecStoreVirtualTuple(slot);
}

} // namespace

int
ClaimDeliveriesDirectPg(int n, const int64 *digest, const Oid *target, int32 claimed_s, char *claimed)
{
	AttrNumber attno[kLedgerColumnCount];
	Relation rel = OpenDirectPg("ledger", kLedgerColumns, kLedgerColumnCount, ACL_INSERT, attno);
	if (rel == NULL)
		return kNotDirect;
	CommandCounterIncrement(); /* as SPI before a statement: see the writes of the ones before */
	ExecWrite w;
	BeginExecWritePg(rel, ACL_INSERT, &w, true);
	const Oid pkey = RelationGetPrimaryKeyIndex(rel);
	/*
	 * In input order, as the statement's ORDER BY inserts them: a digest
	 * twice among them is claimed by the first (the second's key is then
	 * taken by a row of this transaction), so a delivery twice in one batch
	 * is claimed once.  With the pre-check: a delivery claimed before (a
	 * replay) costs a lookup, no insertion.
	 */
	InsertRowsPg(&w, n, pkey, /* precheck */ true, claimed, [&](TupleTableSlot *slot, int i) {
		ClearToNulls(slot);
		SetColumn(slot, attno[0], Int64GetDatum(digest[i]));
		SetColumn(slot, attno[1], ObjectIdGetDatum(target[i]));
		SetColumn(slot, attno[2], Int32GetDatum(claimed_s));
		ExecStoreVirtualTuple(slot);
	});
	EndExecWritePg(&w);
	table_close(rel, NoLock);
	return 1;
}

int
ClaimDeliveryDirectPg(int64 digest, Oid target, int32 claimed_s)
{
	char claimed = 0;
	int r = ClaimDeliveriesDirectPg(1, &digest, &target, claimed_s, &claimed);
	return r == kNotDirect ? r : claimed;
}

namespace {

/*
 * The records of n keys of `target` through the primary key (target, key),
 * in order: locked FOR UPDATE as the apply worker finds a row (`lock`), or
 * read with a new snapshot, unlocked, for an update that checks they did
 * not change meanwhile (UpdateEntityRecordsDirectPg with `lost`).
 */
int
FindEntityRecordsDirectPg(Oid target, int n, const EntityKeyRef *keys, EntityRow *rows, EntityLocation *locs,
                          char *found, bool lock)
{
	AttrNumber attno[kEntityColumnCount];
	/* SELECT ... FOR UPDATE needs UPDATE; the write that follows INSERT or UPDATE */
	Relation rel = OpenDirectPg("entity_state", kEntityColumns, kEntityColumnCount, ACL_SELECT | ACL_INSERT | ACL_UPDATE,
	                            attno);
	if (rel == NULL)
		return kNotDirect;
	const Oid pkey = RelationGetPrimaryKeyIndex(rel);
	CommandCounterIncrement();
	TupleDesc desc = RelationGetDescr(rel);
	TupleTableSlot *search = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	TupleTableSlot *slot = MakeSingleTupleTableSlot(desc, table_slot_callbacks(rel));
	/* unlocked: the latest committed rows and this transaction's own, what a new statement's snapshot sees */
	RowFinder finder;
	if (!lock) {
		PushActiveSnapshot(GetLatestSnapshot());
		BeginRowFinderPg(&finder, rel, pkey, GetActiveSnapshot());
	}
	/* the key's text and what an index lookup allocates, per key */
	MemoryContext per_key = AllocSetContextCreate(CurrentMemoryContext, "cdc_apply entity record lookup",
	                                              ALLOCSET_SMALL_SIZES);
	for (int i = 0; i < n; i++) {
		locs[i] = EntityLocation{};
		MemoryContext caller = MemoryContextSwitchTo(per_key);
		ClearToNulls(search);
		SetColumn(search, attno[E_TARGET], ObjectIdGetDatum(target));
		SetColumn(search, attno[E_KEY], PointerGetDatum(cstring_to_text_with_len(keys[i].data, keys[i].len)));
		ExecStoreVirtualTuple(search);
		/*
		 * Locked: through the primary key with a dirty snapshot, a row
		 * another transaction is inserting, updating or deleting is waited
		 * for, then looked up again; the row found is locked FOR UPDATE
		 * (LockTupleExclusive), following a concurrent update to its newest
		 * version.  What the statement with a fresh snapshot would lock, in
		 * READ COMMITTED.  Unlocked: the row the snapshot sees.
		 */
		bool hit = lock ? RelationFindReplTupleByIndex(rel, pkey, LockTupleExclusive, search, slot)
		                : FindRowPg(&finder, search, slot);
		found[i] = hit ? 1 : 0;
		if (hit) {
			slot_getallattrs(slot);
			EntityRow *row = &rows[i];
			row->src = DatumGetInt32(slot->tts_values[attno[E_SRC] - 1]);
			row->v0 = DatumGetInt32(slot->tts_values[attno[E_V0] - 1]);
			row->v1 = DatumGetInt64(slot->tts_values[attno[E_V1] - 1]);
			row->v2 = DatumGetInt64(slot->tts_values[attno[E_V2] - 1]);
			row->v3 = DatumGetInt32(slot->tts_values[attno[E_V3] - 1]);
			row->deleted = DatumGetBool(slot->tts_values[attno[E_DELETED] - 1]);
			row->chash = DatumGetInt32(slot->tts_values[attno[E_CHASH] - 1]);
			row->touched_s = DatumGetInt32(slot->tts_values[attno[E_TOUCHED] - 1]);
			locs[i].tid = slot->tts_tid;
			locs[i].valid = true;
			locs[i].locked = lock;
		}
		ExecClearTuple(slot);
		ExecClearTuple(search);
		MemoryContextSwitchTo(caller);
		MemoryContextReset(per_key);
	}
	MemoryContextDelete(per_key);
	if (!lock) {
		EndRowFinderPg(&finder);
		PopActiveSnapshot();
	}
	ExecDropSingleTupleTableSlot(slot);
	ExecDropSingleTupleTableSlot(search);
	table_close(rel, NoLock);
	return 1;
}

} // namespace

int
LockEntityRecordsDirectPg(Oid target, int n, const EntityKeyRef *keys, EntityRow *rows, EntityLocation *locs,
                          char *found)
{
	return FindEntityRecordsDirectPg(target, n, keys, rows, locs, found, /* lock */ true);
}

int
ReadEntityRecordsDirectPg(Oid target, int n, const EntityKeyRef *keys, EntityRow *rows, EntityLocation *locs,
                          char *found)
{
	return FindEntityRecordsDirectPg(target, n, keys, rows, locs, found, /* lock */ false);
}

int
FindEntityRecordDirectPg(Oid target, const char *key, int key_len, EntityRow *row, EntityLocation *loc, bool lock)
{
	EntityKeyRef ref{key, key_len};
	char found = 0;
	int r = FindEntityRecordsDirectPg(target, 1, &ref, row, loc, &found, lock);
	return r == kNotDirect ? r : found;
}

int
UpdateEntityRecordsDirectPg(Oid target, int n, const EntityKeyRef *keys, const EntityLocation *locs,
                            const EntityRow *rows, char *lost)
{
	for (int i = 0; i < n; i++)
		if (!locs[i].valid || (!locs[i].locked && lost == NULL))
			return kNotDirect; /* the statement locked it: the statement updates it */
	AttrNumber attno[kEntityColumnCount];
	Relation rel = OpenDirectPg("entity_state", kEntityColumns, kEntityColumnCount, ACL_SELECT | ACL_UPDATE, attno);
	if (rel == NULL)
		return kNotDirect;
	CommandCounterIncrement();
	ExecWrite w;
	BeginExecWritePg(rel, ACL_SELECT | ACL_UPDATE, &w, false);
	w.estate->es_snapshot = ActiveSnapshotSet() ? GetActiveSnapshot() : InvalidSnapshot;
	/* what ExecSimpleRelationUpdate checks first; OpenDirectPg left no trigger, CHECK or generated column */
	CheckCmdReplicaIdentity(rel, CMD_UPDATE);
	TupleDesc desc = RelationGetDescr(rel);
	TupleTableSlot *new_slot = ExecInitExtraTupleSlot(w.estate, desc, &TTSOpsVirtual);
	for (int i = 0; i < n; i++) {
		MemoryContext caller = MemoryContextSwitchTo(GetPerTupleMemoryContext(w.estate));
		FillEntityRow(new_slot, attno, target, PointerGetDatum(cstring_to_text_with_len(keys[i].data, keys[i].len)),
		              &rows[i]);
		if (desc->constr != NULL)
			ExecConstraints(w.rri, new_slot, w.estate);
		/*
		 * The row at locs[i].tid, as simple_table_tuple_update updates it
		 * (HOT where possible; waiting for a concurrent writer), except that
		 * a row that changed since it was read unlocked is reported in
		 * lost[] instead of raising "tuple concurrently updated": its
		 * entity is decided again under a lock.  A row we locked cannot have
		 * changed; a change of our own in between raises, as there, rather
		 * than write over it.
		 */
		ItemPointerData tid = locs[i].tid;
		const bool written = UpdateRowAtPg(w.rri, w.estate, &tid, new_slot);
		if (lost != NULL)
			lost[i] = written ? 0 : 1;
		if (!written && locs[i].locked)
			elog(ERROR, "tuple concurrently updated");
		MemoryContextSwitchTo(caller);
		ResetPerTupleExprContext(w.estate);
	}
	ExecResetTupleTable(w.estate->es_tupleTable, false);
	EndExecWritePg(&w);
	table_close(rel, NoLock);
	return 1;
}

int
UpdateEntityRecordDirectPg(const EntityLocation *loc, Oid target, const char *key, int key_len, const EntityRow *row)
{
	EntityKeyRef ref{key, key_len};
	char lost = 0;
	int r = UpdateEntityRecordsDirectPg(target, 1, &ref, loc, row, &lost);
	return r == kNotDirect ? r : (lost ? 0 : 1);
}

int
InsertEntityRecordsDirectPg(Oid target, int n, const EntityKeyRef *keys, const EntityRow *rows, char *inserted)
{
	AttrNumber attno[kEntityColumnCount];
	Relation rel = OpenDirectPg("entity_state", kEntityColumns, kEntityColumnCount, ACL_INSERT, attno);
	if (rel == NULL)
		return kNotDirect;
	CommandCounterIncrement();
	ExecWrite w;
	BeginExecWritePg(rel, ACL_INSERT, &w, true);
	const Oid pkey = RelationGetPrimaryKeyIndex(rel);
	/*
	 * Keys that had no record when they were looked up (locked): another
	 * record of one is rare (a concurrent first writer), so no pre-check.
	 */
	/* where each record went in, for its next look-up (FindRowPg) */
	RowLocationKeys remember;
	BeginRowLocationKeysPg(rel, OpenedIndexPg(&w, pkey), &remember);
	InsertRowsPg(
	    &w, n, pkey, /* precheck */ false, inserted,
	    [&](TupleTableSlot *slot, int i) {
		    FillEntityRow(slot, attno, target, PointerGetDatum(cstring_to_text_with_len(keys[i].data, keys[i].len)),
		                  &rows[i]);
	    },
	    &remember);
	EndExecWritePg(&w);
	table_close(rel, NoLock);
	return 1;
}

int
InsertEntityRecordDirectPg(Oid target, const char *key, int key_len, const EntityRow *row)
{
	EntityKeyRef ref{key, key_len};
	char inserted = 0;
	int r = InsertEntityRecordsDirectPg(target, 1, &ref, row, &inserted);
	return r == kNotDirect ? r : inserted;
}

int
ReadWatermarkDirectPg(Oid target, int32 src, int32 *v0, int64 *v1, int64 *v2, int32 *v3)
{
	AttrNumber attno[kWatermarkColumnCount];
	Relation rel = OpenDirectPg("prune_watermark", kWatermarkColumns, kWatermarkColumnCount, ACL_SELECT, attno,
	                            AccessShareLock);
	if (rel == NULL)
		return kNotDirect;
	Relation index = index_open(RelationGetPrimaryKeyIndex(rel), AccessShareLock);
	/* the primary key (target, src) of the extension script, else the statement reads it */
	if (index->rd_index->indnkeyatts != 2 || index->rd_index->indkey.values[0] != attno[W_TARGET] ||
	    index->rd_index->indkey.values[1] != attno[W_SRC]) {
		index_close(index, NoLock);
		table_close(rel, NoLock);
		return kNotDirect;
	}
	/* as SPI runs a statement that is not read-only: the writes before it visible, a new snapshot (READ COMMITTED) */
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	ScanKeyData skey[2];
	ScanKeyInit(&skey[0], 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(target)); /* regclass: oid_ops */
	ScanKeyInit(&skey[1], 2, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(src));
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	IndexScanDesc scan = index_beginscan(rel, index, GetActiveSnapshot(), 2, 0);
	index_rescan(scan, skey, 2, NULL, 0);
	int found = 0;
	if (index_getnext_slot(scan, ForwardScanDirection, slot)) {
		slot_getallattrs(slot);
		*v0 = DatumGetInt32(slot->tts_values[attno[W_V0] - 1]);
		*v1 = DatumGetInt64(slot->tts_values[attno[W_V1] - 1]);
		*v2 = DatumGetInt64(slot->tts_values[attno[W_V2] - 1]);
		*v3 = DatumGetInt32(slot->tts_values[attno[W_V3] - 1]);
		found = 1;
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	PopActiveSnapshot();
	index_close(index, NoLock);
	table_close(rel, NoLock);
	return found;
}

} // namespace cdc::pg
