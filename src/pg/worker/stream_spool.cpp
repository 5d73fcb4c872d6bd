// Streamed in-progress transactions (protocol version 2, cdc.streaming).
// The source sends a large transaction in chunks (STREAM START .. STOP)
// before it commits, each change tagged with its (sub)transaction id.
// Nothing may be applied before STREAM COMMIT, so chunks are spooled to one
// temporary file per transaction (a FileSet, as PostgreSQL's own apply
// worker does); STREAM ABORT of a subtransaction cuts the file back to its
// first change, of the transaction drops the file, and STREAM COMMIT
// applies the file like a transaction sent at its commit.  A worker that
// restarts has lost nothing: the source streams the transaction again.
//
// PostgreSQL-regime code (it may ereport): it owns no C++ objects with
// destructors in its frames.  Spool files and their handles are
// PostgreSQL's (FileSet, BufFile), closed or deleted here or at exit.
#include "pg/worker/worker_state.hpp"

extern "C" {
#include "access/xact.h"
#include "libpq/pqformat.h"
#include "storage/ipc.h"
#include "utils/memutils.h"
}

/* Where a subtransaction's first streamed change starts in the spool file. */
typedef struct StreamSubxact {
	TransactionId xid;
	int fileno;
	off_t offset;
} StreamSubxact;

/* A transaction the source streams while it is in progress. */
typedef struct StreamXact {
	TransactionId xid; /* hash key */
	bool foreign_origin; /* an Origin message came with its first chunk */
	int nsubxacts;
	int maxsubxacts;
	StreamSubxact *subxacts; /* in CdcWorkerContext, in the order they were first seen */
} StreamXact;

/* Deletes the spool files when the worker exits (before_shmem_exit). */
static void
stream_cleanup(int code, Datum arg) noexcept
{
	if (W != NULL && W->stream_fileset != NULL)
		FileSetDeleteAll(W->stream_fileset);
}

static char *
stream_file_name(TransactionId xid)
{
	return psprintf("cdc-%d-%u.changes", W->subid, xid);
}

static void
stream_setup(void)
{
	if (W->stream_fileset != NULL)
		return;
	MemoryContext old = MemoryContextSwitchTo(CdcWorkerContext);
	W->stream_fileset = (FileSet *) palloc(sizeof(FileSet));
	FileSetInit(W->stream_fileset);
	HASHCTL ctl;
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(TransactionId);
	ctl.entrysize = sizeof(StreamXact);
	ctl.hcxt = CdcWorkerContext;
	W->streams = hash_create("cdc_apply streamed transactions", 16, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	MemoryContextSwitchTo(old);
	before_shmem_exit(stream_cleanup, (Datum) 0);
}

/* Runs f inside a transaction (the open group's, or a short one of its own): file handles need a resource owner. */
template <typename F>
static void
with_transaction(F &&f)
{
	bool own = !IsTransactionState();
	if (own)
		StartTransactionCommand();
	f();
	if (own)
		CommitTransactionCommand(); /* no xid was assigned: writes no WAL */
}

void
handle_stream_start(StringInfo s)
{
	bool first_segment;
	if (W->in_stream || W->in_xact)
		ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION), errmsg("cdc_apply: STREAM START inside a transaction or stream")));
	TransactionId xid = logicalrep_read_stream_start(s, &first_segment);
	if (!TransactionIdIsValid(xid))
		ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION), errmsg("cdc_apply: STREAM START without a transaction id")));
	stream_setup();
	/* the chunk's file handle lives in a transaction of its own: commit the group first */
	if (W->group_open)
		close_group();
	StartTransactionCommand();
	MemoryContext old = MemoryContextSwitchTo(CdcStreamContext);
	bool found;
	StreamXact *x = (StreamXact *) hash_search(W->streams, &xid, HASH_ENTER, &found);
	if (first_segment || !found) {
		/* the first chunk (again, after a restart of the stream): start an empty file */
		x->nsubxacts = 0;
		x->foreign_origin = false;
		if (!found) {
			x->maxsubxacts = 0;
			x->subxacts = NULL;
		}
		W->stream_file = BufFileCreateFileSet(W->stream_fileset, stream_file_name(xid));
	} else {
		W->stream_file = BufFileOpenFileSet(W->stream_fileset, stream_file_name(xid), O_RDWR, false);
		BufFileSeek(W->stream_file, 0, 0, SEEK_END);
	}
	MemoryContextSwitchTo(old);
	W->in_stream = true;
	W->stream_xid = xid;
}

void
handle_stream_stop(void)
{
	if (!W->in_stream)
		ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION), errmsg("cdc_apply: STREAM STOP outside a stream")));
	BufFileClose(W->stream_file);
	W->stream_file = NULL;
	W->in_stream = false;
	CommitTransactionCommand();
	MemoryContextReset(CdcStreamContext);
}

/*
 * The Origin message of a streamed transaction (in its first chunk, right
 * after STREAM START): it was replicated into the source from elsewhere.
 * With origin = none its changes are neither spooled nor applied.
 */
void
stream_origin(StringInfo s)
{
	XLogRecPtr origin_lsn;
	(void) logicalrep_read_origin(s, &origin_lsn);
	StreamXact *x = (StreamXact *) hash_search(W->streams, &W->stream_xid, HASH_FIND, NULL);
	x->foreign_origin = true;
}

/* Appends one change of the open chunk (its xid already read) to the spool file. */
void
stream_spool(char action, TransactionId xid, StringInfo s)
{
	StreamXact *x = (StreamXact *) hash_search(W->streams, &W->stream_xid, HASH_FIND, NULL);
	if (x->foreign_origin && W->origin_none && action != 'R') {
		/* not applied (origin = none): nothing to keep but its relation messages */
		s->cursor = s->len;
		return;
	}
	if (xid != W->stream_xid) {
		bool seen = false;
		for (int i = 0; i < x->nsubxacts && !seen; i++)
			seen = x->subxacts[i].xid == xid;
		if (!seen) {
			if (x->nsubxacts == x->maxsubxacts) {
				x->maxsubxacts = x->maxsubxacts ? x->maxsubxacts * 2 : 16;
				x->subxacts = x->subxacts ? (StreamSubxact *) repalloc(x->subxacts, sizeof(StreamSubxact) * x->maxsubxacts)
				                          : (StreamSubxact *) MemoryContextAlloc(CdcWorkerContext, sizeof(StreamSubxact) * x->maxsubxacts);
			}
			StreamSubxact *sub = &x->subxacts[x->nsubxacts++];
			sub->xid = xid;
			BufFileTell(W->stream_file, &sub->fileno, &sub->offset);
		}
	}
	/* record: length, change LSN, action, the message after the xid */
	int rest = s->len - s->cursor;
	int len = (int) sizeof(XLogRecPtr) + 1 + rest;
	BufFileWrite(W->stream_file, &len, sizeof(len));
	BufFileWrite(W->stream_file, &W->change_lsn, sizeof(XLogRecPtr));
	BufFileWrite(W->stream_file, &action, 1);
	BufFileWrite(W->stream_file, s->data + s->cursor, rest);
	s->cursor = s->len;
}

void
handle_stream_abort(StringInfo s)
{
	TransactionId xid, subxid;
	if (W->in_stream || W->in_xact)
		ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION), errmsg("cdc_apply: STREAM ABORT inside a transaction or stream")));
	logicalrep_read_stream_abort(s, &xid, &subxid);
	stream_setup();
	bool found;
	StreamXact *x = (StreamXact *) hash_search(W->streams, &xid, HASH_FIND, &found);
	if (!found)
		return; /* nothing of it was spooled by this worker */
	with_transaction([&]() {
		if (subxid == xid) {
			/* the whole transaction aborted (B20: xid 2300) */
			ereport(LOG, (errmsg("cdc_apply subscription \"%s\": streamed transaction %u aborted; its spooled changes are dropped",
			                     W->name, xid)));
			BufFileDeleteFileSet(W->stream_fileset, stream_file_name(xid), true);
			hash_search(W->streams, &xid, HASH_REMOVE, NULL);
			return;
		}
		/* a subtransaction aborted: drop its changes and those of every subtransaction streamed after it */
		for (int i = 0; i < x->nsubxacts; i++) {
			if (x->subxacts[i].xid != subxid)
				continue;
			BufFile *f = BufFileOpenFileSet(W->stream_fileset, stream_file_name(xid), O_RDWR, false);
			BufFileTruncateFileSet(f, x->subxacts[i].fileno, x->subxacts[i].offset);
			BufFileClose(f);
			x->nsubxacts = i;
			ereport(LOG, (errmsg("cdc_apply subscription \"%s\": streamed subtransaction %u of transaction %u aborted; its spooled changes are dropped",
			                     W->name, subxid, xid)));
			break;
		}
	});
}

void
handle_stream_commit(StringInfo s)
{
	LogicalRepCommitData commit;
	if (W->in_stream || W->in_xact)
		ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION), errmsg("cdc_apply: STREAM COMMIT inside a transaction or stream")));
	TransactionId xid = logicalrep_read_stream_commit(s, &commit);
	stream_setup();
	bool found;
	StreamXact *x = (StreamXact *) hash_search(W->streams, &xid, HASH_FIND, &found);
	if (!found)
		ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION),
		                errmsg("cdc_apply: STREAM COMMIT of transaction %u, which was never streamed to this worker", xid)));

	begin_source_xact(commit.commit_lsn, xid, commit.committime);
	W->foreign_origin = x->foreign_origin && W->origin_none && !W->already_applied && !W->skipping;
	with_transaction([&]() {
		if (!W->already_applied && !W->skipping) {
			/* apply the spooled changes in the group's transaction, in the order they were streamed */
			MemoryContext replay = AllocSetContextCreate(CurrentMemoryContext, "CdcStreamReplay", ALLOCSET_DEFAULT_SIZES);
			BufFile *f = BufFileOpenFileSet(W->stream_fileset, stream_file_name(xid), O_RDONLY, false);
			XLogRecPtr saved_lsn = W->change_lsn;
			for (;;) {
				int len;
				size_t got = BufFileRead(f, &len, sizeof(len));
				if (got == 0)
					break;
				if (got != sizeof(len) || len < (int) sizeof(XLogRecPtr) + 1)
					ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("cdc_apply: spool file of transaction %u is damaged", xid)));
				MemoryContext old = MemoryContextSwitchTo(replay);
				StringInfoData rec;
				initStringInfo(&rec);
				enlargeStringInfo(&rec, len);
				if (BufFileRead(f, rec.data, len) != (size_t) len)
					ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("cdc_apply: spool file of transaction %u is damaged", xid)));
				rec.len = len;
				rec.data[len] = '\0';
				memcpy(&W->change_lsn, rec.data, sizeof(XLogRecPtr));
				rec.cursor = sizeof(XLogRecPtr);
				char action = pq_getmsgbyte(&rec);
				if (W->group_open)
					W->group_bytes += len;
				if (action == 'R')
					handle_relation(&rec);
				else if (action == 'I' || action == 'U' || action == 'D' || action == 'T')
					handle_change(action, &rec);
				/* 'Y' (type) and 'M' (message): nothing to apply */
				MemoryContextSwitchTo(old);
				MemoryContextReset(replay);
			}
			W->change_lsn = saved_lsn;
			BufFileClose(f);
			MemoryContextDelete(replay);
		}
		BufFileDeleteFileSet(W->stream_fileset, stream_file_name(xid), true);
	});
	hash_search(W->streams, &xid, HASH_REMOVE, NULL);
	end_source_xact(commit);
}
