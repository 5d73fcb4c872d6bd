// pgoutput intake (the consumer side of PostgreSQL's proto.c): one
// XLogData message dispatched by type (handle_xlogdata); BEGIN and COMMIT
// to transactions.cpp, STREAM messages to stream_spool.cpp, RELATION into
// the relation map, and INSERT/UPDATE/DELETE/TRUNCATE decoded with
// PostgreSQL's readers into ChangeRequests: images, source identity,
// version {epoch, commit LSN, position, 0} with the position taken from the
// change's WAL position, and delivery key (stamping, StampNextChange),
// handed to the engine at once or queued (Submit).
//
// PostgreSQL-regime code (it may ereport): it owns no C++ objects with
// destructors in its frames, and enters C++ only through RunCpp().
// The C++ half (images, requests, Submit) runs only inside RunCpp.
#include "pg/guc.hpp"
#include "pg/worker/worker_state.hpp"

#include "core/errors.hpp"
#include "core/version.hpp"

#include <charconv>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

extern "C" {
#include "utils/builtins.h"
#include "catalog/pg_class.h"
#include "libpq/pqformat.h"
#include "storage/ipc.h"
#include "utils/memutils.h"
}

using cdc::DecodedValue;
using cdc::Op;
using cdc::pg::ChangeRequest;
using cdc::pg::RawImage;


// Hands a change to the engine: applied at once when cdc.apply_batch_changes
// is 1, else queued for the batch engine.  The queue is applied when it
// holds cdc.apply_batch_changes changes or cdc.group_max_bytes of images (so
// wide rows never pile up in memory), at the group's local commit (Finish),
// at the end of each source transaction while the worker retries one by one
// (flush_queue()), and at the end of a copied table.
// The DEBUG1 line for a queue the worker is about to apply (none for an
// empty one); `when` ends it ("inside source transaction 728").
void
LogQueue(const std::string &when)
{
	size_t n = W->engine->QueuedChanges(), bytes = W->engine->QueuedBytes();
	if (n > 0)
		cdc::pg::PgCall([&]() {
			elog(DEBUG1, "cdc_apply: applying %zu queued changes (%zu bytes of images) %s", n, bytes, when.c_str());
		});
}

void
Submit(ChangeRequest &&req, size_t position)
{
	/*
	 * The limit is the one read when the local transaction began: a reload
	 * (SIGHUP, read between any two messages) must not switch to change by
	 * change while changes are queued, or a later change would be applied
	 * before earlier ones.
	 */
	if (W->batch_limit <= 1) {
		W->engine->ApplyChange(req);
		return;
	}
	W->engine->Enqueue(std::move(req), position);
	if (W->engine->QueuedChanges() >= size_t(W->batch_limit) ||
	    W->engine->QueuedBytes() >= size_t(cdc_group_max_bytes) * 1024) {
		clear_cur_table(); /* the queue spans tables: the engine's context names the change's table */
		LogQueue("inside source transaction " + std::to_string(W->xid));
		W->engine->ApplyQueued();
		W->queue_spans = false;
	}
}

/*
 * The spent buffers of the worker's applied queues (core/buffer_pool.hpp):
 * the images and delivery keys of its next changes are written into them
 * (TupleImage, StampNextChange) instead of allocated, change by change
 * (issue 13).  One per worker process, so that it outlives the engine of a
 * group; at most 2 MB of buffers of at most 64 bytes each (docs/worker.md,
 * "Batches").
 */
cdc::BufferPool &
WorkerBufferPool()
{
	/*
	 * Never destroyed: a static object with a destructor would run it in
	 * exit(), in a half-torn-down backend (STYLE.md item 17: no C++ globals
	 * with non-trivial destructors); the process's end frees its memory.
	 */
	static cdc::BufferPool *pool = new cdc::BufferPool(2 * 1024 * 1024);
	return *pool;
}

namespace {


// A pgoutput tuple as a RawImage.  key_only: a replica-identity key tuple
// ('K'), whose non-key columns are sent as NULL and must not be read as NULL.
RawImage
TupleImage(const LogicalRepRelation *rel, const LogicalRepTupleData *tup, bool key_only)
{
	RawImage img;
	/* written over the spent values of an applied change: their buffers are reused (core/buffer_pool.hpp) */
	cdc::ImageWriter values(W->engine->TakeImageValues());
	values.Reserve(size_t(tup->ncols < rel->natts ? tup->ncols : rel->natts));
	for (int i = 0; i < tup->ncols && i < rel->natts; i++) {
		if (key_only && !bms_is_member(i, rel->attkeys))
			continue;
		const char *name = rel->attnames[i];
		switch (tup->colstatus[i]) {
		case LOGICALREP_COLUMN_NULL:
			values.Add(name, DecodedValue::Kind::Null);
			break;
		case LOGICALREP_COLUMN_UNCHANGED:
			values.Add(name, DecodedValue::Kind::Unavailable);
			break;
		case LOGICALREP_COLUMN_TEXT:
			values.Add(name, DecodedValue::Kind::Text, std::string_view(tup->colvalues[i].data, size_t(tup->colvalues[i].len)));
			break;
		default:
			throw cdc::InputError("0A000", std::string("column \"") + name + "\" arrived in binary format, which the worker does not request");
		}
	}
	img.values = values.Finish();
	return img;
}

cdc::SourceInfo
SourceOf(const LogicalRepRelation *rel)
{
	cdc::SourceInfo s;
	s.connector = "pgoutput";
	s.name = W->source_id;
	s.db = W->source_db;
	s.schema = rel->nspname;
	s.table = rel->relname;
	s.lsn = int64_t(W->change_lsn);
	s.commit_lsn = int64_t(W->final_lsn);
	s.tx_id = int64_t(W->xid);
	/* source commit time as Unix milliseconds (history rows, handler metadata) */
	s.ts_ms = W->committime / 1000 + int64_t(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
	return s;
}


// Source identity, version and delivery key of the next change of the
// current source transaction (docs/worker.md, "Positions and delivery keys").
//
// The position of a change in its transaction is taken from the change
// itself, not from a count of the changes this subscription received: two
// subscriptions of one source whose publications differ (sub_a t1 and t2,
// sub_b t2 and t3) receive different changes of one transaction, and a
// count gave the same change of t2 another version and delivery key in each,
// so that its second arrival was applied again (TAP 152).  What both see
// alike is the change's WAL position: the walsender's XLogData message of a
// change carries the LSN of the change's WAL record as its start
// (logical.c sets write_location = change->lsn for every change callback,
// also of a streamed in-progress transaction), kept in W->change_lsn (and in
// the spool, stream_spool.cpp).  Changes of one transaction arrive in
// decoding order, which is WAL order, so the LSNs never decrease.
//
// Several changes can share one record:
// - a heap multi-insert (COPY) decodes into one change per row, all at the
//   record's LSN, one after another.  They get the positions LSN, LSN + 1,
//   LSN + 2, ...: the record takes at least 7 bytes per row
//   (xl_multi_insert_tuple) after its 24-byte header, so LSN + (rows - 1)
//   stays below the next record's LSN and positions never collide across
//   records.  The ordinal is the row's place among the record's rows as
//   decoded, the same for every subscription that receives the table;
//   publication row filters that differ between subscriptions can leave
//   out different rows of one record and shift it (the documented limit);
// - a TRUNCATE of several tables is one record, sent as one message listing
//   the tables each publication publishes (a different subset per
//   subscription), so a place in that list would differ.  Every table of it
//   gets the record's LSN as its position and delivery key, and its source
//   relation OID (the same for every subscription) as the version's fourth
//   component, which keeps the versions of one statement's tables apart.
//
// Version: {epoch, commit LSN, position, 0} (truncate: {epoch, commit LSN,
// position, relation OID}); delivery key pgoutput:<source id>:<commit
// LSN>:<position>, the position in decimal (a number of bytes: pg_lsn -
// '0/0' plus the ordinal).  Allocation-free but for the key's string, which
// reuses a spent key's buffer (issue 13).  relid: the source relation of a
// truncate, InvalidOid for a row change.
void
StampNextChange(ChangeRequest &req, const LogicalRepRelation *rel, Oid truncate_relid)
{
	const XLogRecPtr lsn = W->change_lsn;
	if (lsn == InvalidXLogRecPtr || lsn < W->pos_lsn) {
		char at[40];
		snprintf(at, sizeof at, "%X/%X after %X/%X", CDC_LSN_ARGS(lsn), CDC_LSN_ARGS(W->pos_lsn));
		throw cdc::InputError("08P01",
		                      "cdc_apply: a change of source transaction " + std::to_string(W->xid) +
		                          " arrived without its WAL position or before the previous change's (" + at + ")",
		                      "The position of a change is the start of its XLogData message, which pgoutput sets to the "
		                      "change's WAL record; the changes of a transaction arrive in WAL order.");
	}
	if (OidIsValid(truncate_relid)) {
		W->pos_ordinal = 0; /* every table of the statement at the record's LSN (see above) */
	} else if (lsn == W->pos_lsn && W->pos_row_seen) {
		W->pos_ordinal++; /* the next row of one multi-insert record */
	} else {
		W->pos_ordinal = 0;
	}
	W->pos_lsn = lsn;
	W->pos_row_seen = !OidIsValid(truncate_relid);
	int64_t position = int64_t(lsn) + W->pos_ordinal;
	int64_t fourth = int64_t(truncate_relid);
	if (W->count_positions) {
		/*
		 * A source transaction committed at or below count_positions_until:
		 * applied by 0.1.0 with the count as its changes' positions, so it
		 * keeps them when it is sent again (an origin moved back by hand):
		 * version {epoch, commit LSN, count, 0} and key ...:<count>, for a
		 * truncate's tables too, exactly as 0.1.0 stamped them, and its
		 * re-sent changes are duplicates (docs/worker.md, "Keys from
		 * before this version"; TAP 153).
		 */
		position = W->count_seq;
		fourth = 0;
	}

	req.source = SourceOf(rel);
	W->seq++; /* the count of this subscription's changes: only error contexts name it (Submit) */
	req.total_order = position;
	req.version = cdc::Version{{W->epoch, int64_t(W->final_lsn), position, fourth}};
	if (W->dk_prefix_lsn != W->final_lsn || W->dk_prefix[0] == '\0') {
		/* once per source transaction, not per change */
		snprintf(W->dk_prefix, sizeof(W->dk_prefix), "pgoutput:%s:%X/%X:", W->source_id, CDC_LSN_ARGS(W->final_lsn));
		W->dk_prefix_lsn = W->final_lsn;
	}
	/* one allocation: the prefix and the position, no temporaries */
	char pos[24];
	const char *pos_end = std::to_chars(pos, pos + sizeof pos, position).ptr;
	const size_t prefix_len = strlen(W->dk_prefix);
	std::string &dk = req.delivery_key.emplace(W->engine->TakeKeyBuffer()); /* a spent key's buffer, if any */
	dk.reserve(prefix_len + size_t(pos_end - pos));
	dk.append(W->dk_prefix, prefix_len).append(pos, size_t(pos_end - pos));
}

// Applies the changes queued so far, before a change is checked against
// the destination's rows.
void
ApplyQueuedBeforeCheck()
{
	if (W->engine->QueuedChanges() == 0)
		return;
	clear_cur_table(); /* the queue spans tables: the engine's context names the change's table */
	LogQueue("inside source transaction " + std::to_string(W->xid) + ", before an update to check");
	W->engine->ApplyQueued();
	W->queue_spans = false;
}

// The names of `rel`'s replica identity columns, as its RELATION message
// flags them, into `out` (cleared first).
void
ReplicaIdentityColumns(const LogicalRepRelation *rel, std::vector<std::string> &out)
{
	out.clear();
	for (int i = 0; i < rel->natts; i++)
		if (bms_is_member(i, rel->attkeys))
			out.emplace_back(rel->attnames[i]);
}

// An update of a source table whose replica identity does not carry every
// key column of the destination (REPLICA IDENTITY USING INDEX on other
// columns, or a destination keyed otherwise): the old key is never sent, so
// an update that changes the destination key would be applied as an insert
// under the new key and leave the old row behind, silently.  PostgreSQL's
// subscriber refuses such tables outright (logicalrep_rel_mark_updatable);
// the worker still applies updates that find their row at the new image's
// key (the key did not change, docs/semantics.md B36 (a)) and stops with
// 55000 on one that does not (ApplyEngine::RequireRowAtKey), after applying
// the queued changes that precede it.
void
GuardKeyOutsideIdentity(const LogicalRepRelation *rel, const ChangeRequest &req)
{
	if (rel->replident == REPLICA_IDENTITY_FULL)
		return; /* the old tuple carries every column */
	/*
	 * One vector for every update, not one allocated per change (issue 13);
	 * never destroyed, as WorkerBufferPool's pool
	 */
	static std::vector<std::string> *identity = new std::vector<std::string>();
	ReplicaIdentityColumns(rel, *identity);
	std::optional<std::string> column = W->engine->KeyColumnOutsideIdentity(req.target, *identity);
	if (!column || !req.after)
		return;
	ApplyQueuedBeforeCheck();
	W->engine->RequireRowAtKey(req.target, *req.after, *column);
}

// A change the worker receives and does not apply (UpdateFindsRow,
// FollowDisplacedRows): a DEBUG1 message saying why, as PostgreSQL's
// subscriber logs the update it skips, and the change counted `ignored`
// for its target (cdc.stats), so that every change received counts once
// in one outcome.  `what`: "update" or "delete".
void
SkipChange(const LogicalRepRelation *rel, const ChangeRequest &req, const char *what, const char *why)
{
	cdc::pg::PgCall([&]() {
		ereport(DEBUG1, (errmsg("cdc_apply subscription \"%s\": %s of %s.%s at %X/%X not applied: %s", W->name, what,
		                        rel->nspname, rel->relname, CDC_LSN_ARGS(W->final_lsn), why)));
	});
	W->engine->CountIgnored(req.target);
}

// An update of a table whose publications publish no inserts of it
// (RelEntry::updates_need_row): applied only where the destination has the
// row it changes, as PostgreSQL's subscriber applies an update
// (apply_handle_update skips one that finds no row, with a DEBUG1
// message).  A row inserted on the source after the copy never reached
// the destination, and the update, applied as an upsert, would insert it,
// or a key change would insert the new key (TAP 161).  The row is looked
// up at the old key where the old tuple carries the destination's key (a
// key change, REPLICA IDENTITY FULL), else at the new image's, after the
// queued changes are applied.  False: the update is not applied, and is
// counted as `ignored` for the target (cdc.stats), so that every change the
// worker receives for a target counts once in one outcome.
bool
UpdateFindsRow(const LogicalRepRelation *rel, const ChangeRequest &req)
{
	bool at_old_key = false;
	if (req.before) {
		at_old_key = rel->replident == REPLICA_IDENTITY_FULL;
		if (!at_old_key) {
			std::vector<std::string> identity;
			ReplicaIdentityColumns(rel, identity);
			at_old_key = !W->engine->KeyColumnOutsideIdentity(req.target, identity).has_value();
		}
	}
	if (!at_old_key && !req.after)
		return true;
	ApplyQueuedBeforeCheck();
	if (W->engine->HasRowAtKey(req.target, at_old_key ? *req.before : *req.after, at_old_key ? "before" : "after"))
		return true;
	SkipChange(rel, req, "update", "its publications publish no inserts of the table and the destination has no row for it");
	return false;
}

// Keys that move within one statement (docs/worker.md, "Keys that move
// within one statement"; TAP 169).  A source table with REPLICA IDENTITY
// FULL can hold two rows of one destination key for a moment: under a
// DEFERRABLE key (or none) `UPDATE t SET id = id + 1` and a swap of two
// keys move each row onto the key of a row that moves away later in the
// same statement.  pgoutput sends the updates in the order the rows were
// changed: (4 -> 5) while 5 still has its row, then (5 -> 6).  The
// destination holds one row per key, so the first change writes over the
// row at 5, and the second, applied as the delete of 5 and the insert of
// 6, removed the row the first had moved there: the rows moved by one
// statement were lost, silently, where PostgreSQL's subscriber (matching
// the old tuple's row) moves each.  The worker therefore keeps, per source
// transaction, the digests of the rows a key change finds at its new key
// (after applying what it has queued): they are still on the source, and
// a later change of the transaction whose old tuple (FULL: every column)
// has such a digest at that key moves or deletes that row, not the one
// written there: its key change becomes the upsert of its new key (its
// unchanged TOAST values taken from the old tuple, which FULL carries
// whole), its delete is not applied (counted `ignored`).  An old tuple
// that is not a displaced row's (the row moved there changes again, or
// the destination had a row at its key the source never had) is applied
// as usual.
struct DisplacedRows {
	uint64 serial = 0;                          /* W->xact_serial of the transaction they belong to */
	/* "<target oid>:<compact key>" -> the digests (ImageDigest) of the rows displaced there */
	std::unordered_map<std::string, std::vector<std::string>> rows;
};

DisplacedRows &
Displaced()
{
	/* never destroyed, as WorkerBufferPool's pool */
	static DisplacedRows *d = new DisplacedRows();
	if (d->serial != W->xact_serial) {
		d->rows.clear();
		d->serial = W->xact_serial;
	}
	return *d;
}

// The after-image of a change that moves a displaced row: its unchanged
// (TOASTed) columns read from the old tuple.
RawImage
MergedAfterImage(const LogicalRepRelation *rel, const LogicalRepTupleData *oldtup, const LogicalRepTupleData *newtup)
{
	LogicalRepTupleData merged = *newtup;
	std::vector<StringInfoData> values(newtup->colvalues, newtup->colvalues + newtup->ncols);
	std::vector<char> status(newtup->colstatus, newtup->colstatus + newtup->ncols);
	for (int i = 0; i < newtup->ncols && i < oldtup->ncols; i++) {
		if (status[size_t(i)] != LOGICALREP_COLUMN_UNCHANGED)
			continue;
		status[size_t(i)] = oldtup->colstatus[i];
		values[size_t(i)] = oldtup->colvalues[i];
	}
	merged.colvalues = values.data();
	merged.colstatus = status.data();
	return TupleImage(rel, &merged, false);
}

// False: the change is not applied (a delete of a displaced row).
bool
FollowDisplacedRows(const LogicalRepRelation *rel, ChangeRequest &req, const LogicalRepTupleData *oldtup,
                    const LogicalRepTupleData *newtup)
{
	DisplacedRows &d = Displaced();
	/* the common cases without converting keys: a delete when no row is displaced, an update that keeps its key's texts */
	if (req.op == Op::Delete ? d.rows.empty() : W->engine->SameKeyTexts(req.target, *req.before, *req.after))
		return true;
	std::optional<std::string> old_key = W->engine->StateKeyText(req.target, *req.before, "before");
	if (!old_key)
		return true;
	std::optional<std::string> new_key;
	if (req.op == Op::Update) {
		new_key = W->engine->StateKeyText(req.target, *req.after, "after");
		if (new_key == old_key)
			return true;
	}
	const std::string prefix = std::to_string(req.target) + ":";
	bool from_displaced = false;
	if (!d.rows.empty()) {
		auto it = d.rows.find(prefix + *old_key);
		/*
		 * Only when the old tuple is a displaced row's: else the row moved
		 * there changes again (also when the destination had a row at its
		 * key that the source never had), and a displaced row stays.  Rows
		 * alike but for their key are one whichever moves.
		 */
		if (it != d.rows.end()) {
			std::optional<std::string> digest = W->engine->ImageDigest(req.target, *req.before, "before");
			for (size_t i = 0; digest && i < it->second.size(); i++) {
				if (it->second[i] != *digest)
					continue;
				from_displaced = true;
				it->second.erase(it->second.begin() + long(i));
				if (it->second.empty())
					d.rows.erase(it);
				break;
			}
		}
	}
	if (req.op == Op::Delete) {
		if (!from_displaced)
			return true;
		SkipChange(rel, req, "delete", "it deletes the row an earlier change of the transaction moved another row onto");
		return false;
	}
	ApplyQueuedBeforeCheck();
	if (std::optional<std::string> displaced = W->engine->RowDigestAtKey(req.target, *req.after, "after"))
		d.rows[prefix + *new_key].push_back(std::move(*displaced));
	if (from_displaced) {
		if (oldtup && newtup)
			req.after = MergedAfterImage(rel, oldtup, newtup);
		req.before.reset();
	}
	return true;
}

// Applies one decoded pgoutput change through the engine.
void
ApplyTuple(const LogicalRepRelation *rel, Op op, const LogicalRepTupleData *oldtup, char old_kind,
           const LogicalRepTupleData *newtup, bool updates_need_row = false)
{
	ChangeRequest req;
	req.target = W->engine->ResolveSourceTable(W->name, rel->nspname, rel->relname, true);
	req.op = op;
	if (newtup)
		req.after = TupleImage(rel, newtup, false);
	if (oldtup)
		req.before = TupleImage(rel, oldtup, old_kind == 'K');
	if (op == Op::Update && updates_need_row && !UpdateFindsRow(rel, req)) {
		StampNextChange(req, rel, InvalidOid); /* its position taken, as for an applied change */
		return;
	}
	if (rel->replident == REPLICA_IDENTITY_FULL && req.before && (op == Op::Delete || (op == Op::Update && req.after)) &&
	    !FollowDisplacedRows(rel, req, oldtup, newtup)) {
		StampNextChange(req, rel, InvalidOid); /* its position taken, as for an applied change */
		return;
	}
	if (op == Op::Update)
		GuardKeyOutsideIdentity(rel, req);
	StampNextChange(req, rel, InvalidOid);
	Submit(std::move(req), size_t(W->seq));
}

void
ApplyTruncate(const LogicalRepRelation *rel, bool restart_identity)
{
	ChangeRequest req;
	req.target = W->engine->ResolveSourceTable(W->name, rel->nspname, rel->relname, true);
	req.op = Op::Truncate;
	req.restart_identity = restart_identity;
	StampNextChange(req, rel, rel->remoteid);
	Submit(std::move(req), size_t(W->seq));
}

} // namespace

static void
handle_begin(StringInfo s)
{
	LogicalRepBeginData begin;
	logicalrep_read_begin(s, &begin);
	begin_source_xact(begin.final_lsn, begin.xid, begin.committime);
}

static void
handle_commit(StringInfo s)
{
	LogicalRepCommitData commit;
	logicalrep_read_commit(s, &commit);
	end_source_xact(commit);
}

/*
 * The relation of a row change or of one table of a TRUNCATE that the
 * walsender sent in a transaction the worker applies, counted first in
 * W->count_seq: count positions (StampNextChange) number every change sent,
 * as 0.1.0 did, also of a table the subscription skips (relation_skipped),
 * so that the changes it does apply keep the keys 0.1.0 gave them (TAP 153).
 * The one way a change handler gets its relation: none can forget the count.
 */
static RelEntry *
sent_change_relation(LogicalRepRelId relid)
{
	W->count_seq++;
	bool found;
	RelEntry *e = (RelEntry *) hash_search(W->relations, &relid, HASH_FIND, &found);
	if (!found)
		ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION),
		                errmsg("cdc_apply: change for unknown relation %u (no RELATION message)", relid)));
	W->cur_rel = e->rel; /* named by the error context, formatted only there */
	W->cur_table[0] = '\0';
	return e;
}

/*
 * Does the change of this relation in the current source transaction stay
 * unapplied?  As PostgreSQL's apply worker decides it
 * (should_apply_changes_for_rel): a table that is not part of the
 * subscription (cdc.subscription_rel) is not applied — a warning says so
 * once per table and worker, cdc.refresh_subscription adds it — and a
 * copied table's changes in source transactions committed before its copy
 * point are in the copy (table_copy.cpp, sync_tables).
 */
static bool
relation_skipped(RelEntry *e)
{
	if (e->table_state == TABLE_READY) {
		if (W->final_lsn < e->sync_lsn)
			return true;
		/*
		 * The first applied change of a table without a recorded source
		 * OID (one added without a copy after the slot was made: the
		 * slot's own tables have theirs from its snapshot) teaches it
		 * (learn_source_relid).  Here, not at its RELATION
		 * message: the walsender sends that once per session, also inside
		 * a transaction the worker skips (already applied, or
		 * cdc.skip_transaction), and nothing was learnt then until the
		 * next session, so a rename before it went unnoticed (TAP 076,
		 * "skipped").
		 */
		if (!OidIsValid(e->source_relid)) {
			TableState *t = find_table_state(e->rel->nspname, e->rel->relname);
			(void) learn_source_relid(t, e->rel->remoteid, W->final_lsn);
			if (t != NULL)
				e->source_relid = t->source_relid;
		}
		/*
		 * The table of this name is another source relation than the one
		 * copied: dropped and created again (or another table renamed to
		 * its name) on the source, and published again.  Its changes
		 * applied over the rows copied from the dropped table mixed the
		 * two, while the subscription showed streaming (and the rows the
		 * new table got before it was published never came; review h1,
		 * TAP 078).  Stop, as for a rename: cdc.resync_table copies the
		 * new table and deletes the dropped one's rows.
		 */
		if (OidIsValid(e->source_relid) && e->source_relid != e->rel->remoteid)
			ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			                errmsg("cdc_apply subscription \"%s\": source table %s.%s is another relation than the one "
			                       "the subscription applied (relation OID %u, recorded as OID %u): it was dropped and "
			                       "created again, or another table renamed to its name, on the source",
			                       W->name, quote_identifier(e->rel->nspname), quote_identifier(e->rel->relname),
			                       e->rel->remoteid, e->source_relid),
			                errdetail("The destination table holds the rows of the dropped relation; the rows the new "
			                          "one got before it was published were never sent."),
			                errhint("Copy the new table with cdc.resync_table('%s', <its destination table>): the copy "
			                        "deletes the rows the new table does not have that the subscription wrote (TRUNCATE "
			                        "the destination table first if it holds rows loaded otherwise), and the worker goes "
			                        "on from there.",
			                        W->name)));
		return false;
	}
	if (!e->warned) {
		/*
		 * A table the subscription does not know under this name, copied
		 * from the same source relation under another: renamed or moved
		 * on the source (ALTER TABLE ... RENAME, SET SCHEMA), it stays
		 * published under its new name.  Skipping its changes, as for a
		 * table the subscription never had, lost them while the
		 * subscription showed streaming (review helper; TAP 073,
		 * "rename"): stop instead, as PostgreSQL's own subscriber stops
		 * there (its target relation of the new name does not exist).
		 */
		const char *was = e->table_state == TABLE_UNKNOWN ? table_copied_from(e->rel->remoteid, W->final_lsn) : NULL;
		if (was != NULL)
			ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			                errmsg("cdc_apply subscription \"%s\": source table %s of the subscription is now called %s.%s "
			                       "(renamed or moved on the source; relation OID %u): its changes cannot be applied",
			                       W->name, was, quote_identifier(e->rel->nspname), quote_identifier(e->rel->relname),
			                       e->rel->remoteid),
			                errhint("Give the destination table the new name (or map the new source name to it with "
			                        "cdc.register_mapping(..., source_table => ...)), then run cdc.refresh_subscription('%s'), "
			                        "which makes the new name part of the subscription and copies the table again.",
			                        W->name)));
		e->warned = true;
		ereport(WARNING, (errmsg("cdc_apply subscription \"%s\": changes of %s.%s are not applied: the table is not part of "
		                         "subscription \"%s\"%s",
		                         W->name, e->rel->nspname, e->rel->relname, W->name,
		                         e->table_state == TABLE_INIT ? " yet (it waits for its copy)" : ""),
		                  errhint("cdc.refresh_subscription('%s') adds the tables its publications publish, copying their rows; "
		                          "cdc.resync_table copies one table again.",
		                          W->name)));
	}
	return true;
}

/*
 * A copy of `r` (as logicalrep_read_rel lays it out) in `cxt`, and the
 * freeing of such a copy.
 */
static LogicalRepRelation *
copy_relation(const LogicalRepRelation *r, MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	LogicalRepRelation *c = (LogicalRepRelation *) palloc(sizeof(LogicalRepRelation));
	*c = *r;
	c->nspname = pstrdup(r->nspname);
	c->relname = pstrdup(r->relname);
	c->attnames = (char **) palloc(sizeof(char *) * Max(r->natts, 1));
	c->atttyps = (Oid *) palloc(sizeof(Oid) * Max(r->natts, 1));
	for (int i = 0; i < r->natts; i++) {
		c->attnames[i] = pstrdup(r->attnames[i]);
		c->atttyps[i] = r->atttyps[i];
	}
	c->attkeys = bms_copy(r->attkeys);
	MemoryContextSwitchTo(old);
	return c;
}

static void
free_relation(LogicalRepRelation *r)
{
	for (int i = 0; i < r->natts; i++)
		pfree(r->attnames[i]);
	pfree(r->attnames);
	pfree(r->atttyps);
	bms_free(r->attkeys);
	pfree(r->nspname);
	pfree(r->relname);
	pfree(r);
}

/*
 * A RELATION message.  It is read in the message's own (short-lived)
 * context, so that a malformed one leaves nothing behind, then copied into
 * CdcWorkerContext in place of the relation's previous copy, which is
 * freed: the walsender sends a table's RELATION message again after every
 * invalidation of the table on the source (an ALTER TABLE, a GRANT, an
 * ANALYZE), and a source superuser can send as many as it likes.  Each
 * previous copy used to stay in CdcWorkerContext for the worker's life, so
 * the worker grew by every message's size without bound (security review
 * h2, test/t/162_worker_relation_message_memory.pl: 16 MB for 300 messages
 * of a 400-column table).  Nothing keeps a relation's pointers across
 * messages but W->cur_rel (the error context's current change), which
 * follows the new copy.  The entries themselves are one per source
 * relation OID the source names.
 */
void
handle_relation(StringInfo s)
{
	LogicalRepRelation *rel = copy_relation(logicalrep_read_rel(s), CdcWorkerContext);
	MemoryContext old = MemoryContextSwitchTo(CdcWorkerContext);
	bool found;
	RelEntry *e = (RelEntry *) hash_search(W->relations, &rel->remoteid, HASH_ENTER, &found);
	if (found && e->rel != NULL) {
		if (W->cur_rel == e->rel)
			W->cur_rel = rel;
		free_relation(e->rel);
	}
	e->rel = rel;
	if (!found)
		e->warned = false;
	TableState *t = find_table_state(rel->nspname, rel->relname);
	e->table_state = t ? t->state : TABLE_UNKNOWN;
	e->sync_lsn = t ? t->sync_lsn : InvalidXLogRecPtr;
	e->source_relid = t ? t->source_relid : InvalidOid;
	e->updates_need_row = t ? t->updates_need_row : false;
	MemoryContextSwitchTo(old);
}

/*
 * An Origin message: the source transaction that follows BEGIN was
 * replicated into the source from elsewhere (its commit carries a
 * replication origin).  With origin = none (PostgreSQL 16's meaning) its
 * changes are not applied; the transaction still completes, so the
 * progress moves past it.
 */
static void
handle_origin(StringInfo s)
{
	XLogRecPtr origin_lsn;
	char *origin = logicalrep_read_origin(s, &origin_lsn);
	if (!W->in_xact)
		ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION), errmsg("cdc_apply: origin message outside a transaction")));
	if (W->origin_none && !W->already_applied && !W->skipping) {
		W->foreign_origin = true;
		ereport(DEBUG1, (errmsg("cdc_apply subscription \"%s\": source transaction %u committed at %X/%X comes from origin "
		                        "\"%s\"; not applied (origin = none)",
		                        W->name, W->xid, CDC_LSN_ARGS(W->final_lsn), origin)));
	}
}

/*
 * An INSERT that lacks a value: pgoutput (PostgreSQL 15) sends an UPDATE
 * that moves a row into a publication's row filter as an INSERT of the new
 * row, and a TOASTed value the UPDATE did not change is not in that
 * UPDATE's WAL, nor in its old row unless the table has REPLICA IDENTITY
 * FULL: the column is sent as "unchanged" ('u').  Nothing in the stream
 * says what the value is.  PostgreSQL's own subscriber inserts NULL there
 * (or fails on a NOT NULL column); the engine recorded a conflict and went
 * on without the row.  Either way the destination silently differs from
 * the source.  The worker stops instead, naming the table and the column;
 * cdc.resync_table copies the table at a newer snapshot, and the stream
 * skips its changes before that point, this INSERT included (review h2,
 * TAP 127).
 */
static void
refuse_insert_without_value(const LogicalRepRelation *rel, const LogicalRepTupleData *tup)
{
	for (int i = 0; i < tup->ncols && i < rel->natts; i++) {
		if (tup->colstatus[i] != LOGICALREP_COLUMN_UNCHANGED)
			continue;
		const char *table = quote_qualified_identifier(rel->nspname, rel->relname);
		ereport(ERROR,
		        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		         errmsg("cdc_apply: the source sent an INSERT into table %s without the value of column \"%s\"", table,
		                rel->attnames[i]),
		         errdetail("pgoutput sends an UPDATE that moves a row into the publication's row filter as an INSERT; "
		                   "a TOASTed value that the UPDATE left unchanged is not in it unless the source table has "
		                   "REPLICA IDENTITY FULL. Applying the row without it would make it differ from the source."),
		         errhint("Copy the table again with cdc.resync_table('%s', <its destination table>): the stream skips "
		                 "its changes before the copy, this one included. Set REPLICA IDENTITY FULL on %s at the "
		                 "source so that such rows carry every value.",
		                 W->name, table)));
	}
}

void
handle_change(char action, StringInfo s)
{
	LogicalRepTupleData newtup, oldtup;
	bool has_old = false;
	LogicalRepRelId relid;

	if (!W->in_xact)
		ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION), errmsg("cdc_apply: change outside a transaction")));
	switch (action) {
	case 'I': {
		relid = logicalrep_read_insert(s, &newtup);
		if (W->already_applied || W->skipping || W->foreign_origin)
			return;
		RelEntry *e = sent_change_relation(relid);
		if (relation_skipped(e))
			return;
		refuse_insert_without_value(e->rel, &newtup);
		cdc::pg::RunCpp([&]() { ApplyTuple(e->rel, Op::Create, NULL, 0, &newtup); });
		break;
	}
	case 'U': {
		/* the old tuple kind ('K' key, 'O' full) is the byte after the relid */
		char kind = s->len > s->cursor + 4 ? s->data[s->cursor + 4] : 'N';
		relid = logicalrep_read_update(s, &has_old, &oldtup, &newtup);
		if (W->already_applied || W->skipping || W->foreign_origin)
			return;
		RelEntry *e = sent_change_relation(relid);
		if (relation_skipped(e))
			return;
		cdc::pg::RunCpp([&]() { ApplyTuple(e->rel, Op::Update, has_old ? &oldtup : NULL, kind, &newtup, e->updates_need_row); });
		break;
	}
	case 'D': {
		char kind = s->len > s->cursor + 4 ? s->data[s->cursor + 4] : 'K';
		relid = logicalrep_read_delete(s, &oldtup);
		if (W->already_applied || W->skipping || W->foreign_origin)
			return;
		RelEntry *e = sent_change_relation(relid);
		if (relation_skipped(e))
			return;
		cdc::pg::RunCpp([&]() { ApplyTuple(e->rel, Op::Delete, &oldtup, kind, NULL); });
		break;
	}
	case 'T': {
		bool cascade, restart_seqs;
		List *relids = logicalrep_read_truncate(s, &cascade, &restart_seqs);
		if (W->already_applied || W->skipping || W->foreign_origin)
			return;
		ListCell *lc;
		foreach (lc, relids) {
			RelEntry *e = sent_change_relation(lfirst_oid(lc)); /* counts each table, as 0.1.0 did */
			if (!relation_skipped(e))
				cdc::pg::RunCpp([&]() { ApplyTruncate(e->rel, restart_seqs); });
		}
		break;
	}
	}
	W->group_changes++;
	if (fault_after_change(W->group_changes)) {
		flush_queue(); /* "after the N-th change applied": applied, not only queued */
		ereport(LOG, (errmsg("cdc_apply: fault point after_change:%d reached, exiting", W->group_changes)));
		proc_exit(1);
	}
}

void
handle_xlogdata(StringInfo s)
{
	XLogRecPtr start = pq_getmsgint64(s);
	XLogRecPtr end = pq_getmsgint64(s);
	(void) pq_getmsgint64(s); /* send time */
	if (start > W->received)
		W->received = start;
	if (end > W->received)
		W->received = end;
	if (end > W->source_end)
		W->source_end = end;
	W->change_lsn = start;

	char action = pq_getmsgbyte(s);
	if (W->in_stream) {
		/* inside a chunk of a streamed transaction: spool, apply at its commit */
		switch (action) {
		case 'E': handle_stream_stop(); return;
		case 'O': stream_origin(s); return; /* in the first chunk, after STREAM START; no xid */
		case 'R':
		case 'Y':
		case 'I':
		case 'U':
		case 'D':
		case 'T':
		case 'M': {
			TransactionId xid = pq_getmsgint(s, 4);
			if (action != 'Y' && action != 'M')
				stream_spool(action, xid, s);
			return;
		}
		default:
			ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION),
			                errmsg("cdc_apply: unexpected pgoutput message type \"%c\" inside a stream", action)));
		}
	}
	if (W->group_open)
		W->group_bytes += s->len;
	switch (action) {
	case 'S': handle_stream_start(s); break;
	case 'A': handle_stream_abort(s); break;
	case 'c': handle_stream_commit(s); break;
	case 'B': handle_begin(s); break;
	case 'C': handle_commit(s); break;
	case 'R': handle_relation(s); break;
	case 'I':
	case 'U':
	case 'D':
	case 'T': handle_change(action, s); break;
	case 'O': handle_origin(s); break;
	case 'Y': /* type: values arrive as text and go through the destination types' input functions */
	case 'M': /* logical decoding message: not a change */
		break;
	default:
		ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION),
		                errmsg("cdc_apply: unexpected pgoutput message type \"%c\"", action)));
	}
}
