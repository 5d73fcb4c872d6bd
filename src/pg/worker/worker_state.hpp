// The apply worker's shared state (src/pg/worker/): the WorkerState of the
// one subscription this process applies (W), the worker's memory contexts,
// the relation map entries and flush positions, and the declarations of the
// functions one file of the folder calls in another (each is defined in the
// file named above its group).
//
// PostgreSQL-regime code: W and the contexts are plain pointers, defined in
// apply_worker.cpp, set up by cdc_apply_worker_main and never freed by C++;
// nothing here owns a C++ object.  The C++ functions (LogQueue,
// Submit) may throw and are called only inside RunCpp.
#pragma once

#include "pg/apply/engine.hpp"
#include "pg/guard.hpp"
#include "pg/worker/worker.hpp"

#include <string>

extern "C" {
#include "access/xlogdefs.h"
#include "datatype/timestamp.h"
#include "lib/stringinfo.h"
#include "libpq-fe.h"
#include "replication/logicalproto.h"
#include "storage/buffile.h"
#include "storage/fileset.h"
#include "utils/hsearch.h"
}

/* LSN_FORMAT_ARGS uses a C-only type check; the same for C++. */
#define CDC_LSN_ARGS(lsn) (uint32) ((lsn) >> 32), (uint32) (lsn)

/* A table's state in the subscription (cdc.subscription_rel.state) */
#define TABLE_UNKNOWN 'u' /* published, but not part of the subscription: not applied */
#define TABLE_INIT 'i'    /* waits for its copy: not applied */
#define TABLE_READY 'r'   /* applied, except what its copy holds (sync_lsn) */

typedef struct RelEntry {
	LogicalRepRelId remoteid; /* hash key */
	LogicalRepRelation *rel;  /* copied into CdcWorkerContext */
	char table_state;         /* TABLE_*, read at its RELATION message */
	XLogRecPtr sync_lsn;      /* TABLE_READY: changes committed before it are in its copy */
	Oid source_relid;         /* TABLE_READY: the source relation it was copied from (InvalidOid: not recorded) */
	bool warned;              /* the warning about its unapplied changes was logged */
	bool updates_need_row;    /* TableState::updates_need_row, read at its RELATION message */
} RelEntry;

typedef struct FlushPosition {
	XLogRecPtr local_end;
	XLogRecPtr remote_end;
} FlushPosition;

typedef struct WorkerState {
	int subid;
	char *name;
	char *conninfo;
	char *slot_name;
	char *publications; /* "\"a\",\"b\"" for START_REPLICATION */
	char *publications_sql; /* 'a','b' for SQL */
	bool create_slot;
	bool copy_data;
	bool slot_ready;
	int64 epoch;
	XLogRecPtr skip_lsn;
	int retry_count;
	Oid owner;         /* the subscription's owner: the worker never applies with more rights */
	bool run_as_owner; /* apply as the owner, not as each table's owner (docs/security.md) */
	bool origin_none;     /* origin = none: source transactions with an Origin message are not applied */
	bool refresh_pending; /* read the publications' tables before streaming (alter_subscription) */
	HTAB *tables;         /* the subscription's tables: "schema"."table" -> TableState (table_copy.cpp) */
	bool relids_learnt;   /* a table's source OID was learnt from the stream and is not saved yet (save_learnt_relids) */

	RepOriginId origin;
	bool setting_up_origin;
	PGconn *conn;
	char *source_id; /* "pg:<system identifier>" */
	char *source_db;
	HTAB *relations;

	/*
	 * Continuity of the stream (continuity.cpp, docs/worker.md
	 * "Continuity"): the source as IDENTIFY_SYSTEM reports it on this
	 * connection, the slot's identity recorded in cdc.subscription (NULL
	 * system id: none recorded yet), the position confirmed to the source
	 * while idle (durable before it was reported), and a pending
	 * cdc.accept_gap request (0: none).
	 */
	char *system_id;
	uint32 timeline;
	char *slot_system_id;
	uint32 slot_timeline;
	XLogRecPtr confirmed_lsn;
	int64 gap_request;
	bool healthy;             /* streams again since the last error: last_error and retry_count were cleared */
	XLogRecPtr source_wal_at_connect; /* the source's WAL position when this connection began (IDENTIFY_SYSTEM) */
	bool keepalive_seen;      /* a keepalive arrived on this connection */
	bool streaming;           /* START_REPLICATION succeeded on this connection: the stream is open */
	int source_sender_timeout; /* the walsender's wal_sender_timeout in ms (0: none; -1: not known) */
	TimestampTz last_reply_sent; /* the last standby status update sent on this connection */

	XLogRecPtr progress;      /* origin progress: end LSN of the last applied source transaction */
	XLogRecPtr received;      /* highest LSN received */
	XLogRecPtr source_end;    /* source WAL end from the last message */
	XLogRecPtr reported_flush;
	FlushPosition *flushes;   /* commits not yet known to be flushed locally */
	int nflushes;
	int maxflushes;
	TimestampTz last_status;
	TimestampTz last_commit_time;

	/* the source transaction being applied */
	bool in_xact;
	bool skipping;        /* explicit operator skip */
	bool foreign_origin;  /* it carries a replication origin and origin = none: its changes are not applied */
	bool already_applied; /* commit before our progress: replayed by the source (B16) */
	XLogRecPtr final_lsn;
	TransactionId xid;
	TimestampTz committime;
	int seq;              /* changes of it this subscription applied so far: named by error contexts */
	XLogRecPtr change_lsn; /* the WAL position of the change being read (its XLogData start; the spool keeps it) */
	/*
	 * The position of the last stamped change (StampNextChange): its LSN, its
	 * ordinal among the rows of one multi-insert record at that LSN, and
	 * whether it was a row change (not a truncate).  Reset at BEGIN.
	 */
	XLogRecPtr pos_lsn;
	int64 pos_ordinal;
	bool pos_row_seen;
	/*
	 * Count positions (docs/worker.md, "Keys from before this version"):
	 * cdc.subscription.count_positions_until (InvalidXLogRecPtr: none), the
	 * commit LSN up to which source transactions were applied by 0.1.0,
	 * whose positions counted the changes; whether the current transaction
	 * is one of them (set at BEGIN); and its changes counted as 0.1.0 did
	 * (every row change and every table of a TRUNCATE the source sent,
	 * also of a table this version does not apply).
	 */
	XLogRecPtr count_positions_until;
	bool count_positions;
	int64 count_seq;
	uint64 xact_serial;         /* counts begin_source_xact: the rows displaced in a transaction (pgoutput.cpp) are its own */
	int64 replays_discarded; /* source transactions re-sent below our progress since the last one applied */
	/*
	 * The table of the change being applied, for the error context (""
	 * and NULL when none): the initial copy writes its name, the stream
	 * points at the relation (whose names stay in CdcWorkerContext), so
	 * that the name is formatted only if an error needs it
	 * (clear_cur_table() clears both).
	 */
	char cur_table[2 * NAMEDATALEN + 2];
	const LogicalRepRelation *cur_rel;
	char dk_prefix[128];        /* "pgoutput:<source id>:<commit LSN>:" of the transaction at dk_prefix_lsn */
	XLogRecPtr dk_prefix_lsn;
	cdc::pg::ApplyEngine *engine;

	/*
	 * The group: the local transaction that holds the source transactions
	 * applied since the last local commit (docs/worker.md, "Grouping").
	 */
	bool group_open;
	int group_xacts;              /* source transactions completed in it */
	int group_changes;            /* changes applied in it (fault point after_change:N) */
	int64 group_bytes;            /* pgoutput bytes received for it */
	TimestampTz group_start;
	XLogRecPtr group_end_lsn;     /* end LSN of its last completed source transaction */
	XLogRecPtr group_last_final;  /* commit LSN of that transaction */
	TransactionId group_last_xid; /* and its xid */
	bool queue_spans;             /* the engine's queue holds changes of an earlier source transaction of the group */
	int batch_limit;              /* cdc.apply_batch_changes as it was when the local transaction began */
	TimestampTz group_commit_time;
	bool committing_group;        /* inside its local commit (error attribution) */
	XLogRecPtr one_by_one_until;  /* after a failed group: one local commit per source transaction up to this commit LSN */
	/*
	 * In-progress transactions the source streams (protocol version 2,
	 * cdc.streaming): their changes are spooled to one temporary file per
	 * transaction and applied when STREAM COMMIT arrives.
	 */
	FileSet *stream_fileset;
	HTAB *streams;                /* TransactionId -> StreamXact */
	bool in_stream;               /* between STREAM START and STREAM STOP */
	TransactionId stream_xid;     /* the transaction of the open chunk */
	BufFile *stream_file;         /* its spool file while the chunk is open */
	int64 stat_xacts;             /* source transactions applied, not yet added to cdc.subscription_state */
	int64 stat_commits;           /* local commits of them, likewise */
	/*
	 * The source commit times of the applied source transactions of the
	 * open group: their apply latency (to the local commit) is counted
	 * after the commit (cdc.apply_latency, pg/shared_stats.hpp).
	 */
	TimestampTz *latency_pending;
	int latency_n;
	int latency_max;
} WorkerState;

extern WorkerState *W;

/* No table named in the error context (WorkerState.cur_table). */
static inline void
clear_cur_table(void)
{
	W->cur_table[0] = '\0';
	W->cur_rel = NULL;
}
extern MemoryContext CdcWorkerContext;
extern MemoryContext CdcMessageContext;
extern MemoryContext CdcStreamContext; /* the open chunk's file handle; reset at STREAM STOP */

/* apply_worker.cpp: test-only fault points (cdc.debug_fault) */
bool fault(const char *point);
bool fault_after_change(int nchanges);
void fault_pause(const char *transition);
/* The spent buffers of the worker's applied queues, for its next changes (pgoutput.cpp). */
cdc::BufferPool &WorkerBufferPool();

/* status.cpp: the worker's own statements, cdc.subscription_state, errors */
int spi_exec(const char *sql, int nargs, const char **args);
void exec_in_own_xact(const char *sql, int nargs, const char **args);
const char *lsn_text(XLogRecPtr lsn);
void write_status(const char *state, bool reset_retries);
void record_error_and_exit(ErrorData *edata);

/* source_conn.cpp: the replication connection */
PGconn *connect_pinned(const char *conninfo, bool replication, const char *appname, char **err);
PGresult *conn_exec(PGconn *conn, const char *sql, ExecStatusType expected);
/*
 * The source's SQLSTATE of a failed result as an ERRCODE (MAKE_SQLSTATE), so
 * that a caller re-raises the source's own error class; fallback when there
 * is no result or no five-character SQLSTATE (a broken connection: callers
 * pass ERRCODE_CONNECTION_FAILURE, 08006).
 */
int source_sqlstate(const PGresult *res, int fallback);
/*
 * PQexec that a SIGTERM or a cancel can interrupt: the command is sent and
 * its result waited for on the latch and the socket (as PostgreSQL's
 * walreceiver, libpqrcv_PQexec), so that cdc.drop_subscription can stop a
 * worker whose CREATE_REPLICATION_SLOT waits for a source transaction.
 * Returns the last result (a COPY result at once), or NULL when the
 * command could not be sent or the connection broke (PQerrorMessage).
 */
PGresult *exec_interruptible(PGconn *conn, const char *sql);
/*
 * PQgetResult of a command sent with PQsendQuery, waiting on the latch and
 * the socket until `deadline` (DT_NOEND: none): a SIGTERM or a
 * cancel ends the wait with the process's own exit or error (none while
 * interrupts are held, as in an abort callback).  Returns the next result,
 * or NULL: the command's results are all read (*how RESULT_READY), the
 * connection broke (RESULT_BROKEN, PQerrorMessage says why) or the
 * deadline passed (RESULT_TIMEOUT).
 */
typedef enum ResultWait { RESULT_READY, RESULT_BROKEN, RESULT_TIMEOUT } ResultWait;
PGresult *get_result_until(PGconn *conn, TimestampTz deadline, ResultWait *how);
/* PQgetCopyData of a COPY OUT, waiting interruptibly: its length, -1 at the end, -2 on an error. */
int get_copy_data_interruptible(PGconn *conn, char **buf);
PGresult *source_exec(const char *sql, ExecStatusType expected);
/*
 * The tables the publications publish (source_conn.cpp), with their source
 * OIDs: 42704 for a publication the source does not have, or with
 * missing_ok n = -1 and `missing` set.
 */
void source_published_tables(PGconn *conn, const char *publications_sql, bool missing_ok, PublishedTables *out);
void connect_source(void);
void send_feedback(bool force, bool request_reply);
/*
 * The engine's progress hook: a standby status update at least every
 * min(cdc.status_interval, wal_sender_timeout / 4) while the engine applies
 * (docs/worker.md, "A long batch and wal_sender_timeout").
 */
void keep_source_alive(void);

/* progress.cpp: origin progress and flush positions */
void commit_with_progress(XLogRecPtr remote_end, TimestampTz remote_time);
/* deferred triggers and WITH HOLD cursors of applied rows, run as the subscription owner before a commit */
void run_commit_time_code_as_owner(void);
void remember_flush(XLogRecPtr local_end, XLogRecPtr remote_end);

/* pgoutput.cpp: pgoutput messages -> change requests (C++: only inside RunCpp) */
void LogQueue(const std::string &when);
void Submit(cdc::pg::ChangeRequest &&req, size_t position);
void handle_relation(StringInfo s);
void handle_change(char action, StringInfo s);
void handle_xlogdata(StringInfo s);

/* transactions.cpp: source transactions, groups, local commits */
void begin_local_xact(void);
void flush_queue(void);
void close_group(void);
void begin_source_xact(XLogRecPtr final_lsn, TransactionId xid, TimestampTz committime);
void end_source_xact(const LogicalRepCommitData &commit);

/* stream_spool.cpp: streamed in-progress transactions */
void handle_stream_start(StringInfo s);
void handle_stream_stop(void);
void stream_spool(char action, TransactionId xid, StringInfo s);
void stream_origin(StringInfo s);
void handle_stream_abort(StringInfo s);
void handle_stream_commit(StringInfo s);

/* table_copy.cpp: slot creation, the subscription's tables and their copies */
/*
 * The subscription's tables as the stream needs them: read from
 * cdc.subscription_rel when the worker (re)connects, after sync_tables.
 * cdc.refresh_subscription, cdc.resync_table and the drop of a destination
 * table change them and restart the worker, so they are never read again
 * while it streams.  Key: quote_identifier(schema) "." quote_identifier(table).
 */
typedef struct TableState {
	char key[2 * 4 * NAMEDATALEN + 8];
	char state;
	XLogRecPtr sync_lsn;
	Oid source_relid; /* the source's OID of the table when it was copied (or learnt); InvalidOid: not recorded */
	bool learnt;      /* source_relid learnt from the stream, not saved yet */
	/*
	 * Its publications publish no inserts of it (read from the source at
	 * each start, load_table_states): an update applies only where the
	 * destination has the row, as PostgreSQL's subscriber applies it.
	 */
	bool updates_need_row;
	char schema[NAMEDATALEN];
	char table[NAMEDATALEN];
} TableState;

void prepare_slot(void);
void sync_tables(void);
void load_table_states(void);
// The subscription's entry of a published table (state, copy point, recorded
// source OID), or NULL when the table is not part of the subscription.
TableState *find_table_state(const char *schema, const char *table);
// The subscription's table copied from source relation `relid`, as
// quoted "schema.table" (cdc.subscription_rel.source_relid), or NULL (also
// where a change committed at `final_lsn` is in its copy).
const char *table_copied_from(Oid relid, XLogRecPtr final_lsn);
// A change the worker applies is of table `t` of the subscription
// (find_table_state; NULL: nothing to learn), source relation `relid`,
// committed at `final_lsn`; where `t` is ready and has no recorded source
// OID (added without a copy after the slot was made, create_slot => false,
// or not copied by this version), records `relid`
// in memory, for the rename check from now on (true; false where
// nothing was learnt); save_learnt_relids saves it with the group's commit.
bool learn_source_relid(TableState *t, Oid relid, XLogRecPtr final_lsn);
// In the group's open local transaction: writes the learnt OIDs to
// cdc.subscription_rel.source_relid (where it is still NULL).
void save_learnt_relids(void);

/* continuity.cpp: proof that the slot continues after our progress; control transitions */
void verify_continuity(void);
void record_slot_identity(XLogRecPtr start_lsn);
void commit_control_transition(void);
/*
 * XLogFlush of all the WAL inserted so far, by any backend.  Not of
 * GetXLogInsertRecPtr() as it stands: when the last record ended exactly at
 * a page end, that is where the next record will start, past the next
 * page's header, which nothing has written ("xlog flush request … is not
 * satisfied"; test/t/057_worker_wal_page_boundary.pl).
 */
void flush_inserted_wal(void);
void confirm_idle_position(XLogRecPtr lsn);
void mark_healthy(void);
