// The apply engine (SPEC §4): one change event, inside the caller's
// transaction: dedup claim -> entity lock -> version/tombstone/barrier check
// -> projection mutation -> outbox row -> counters.  Everything it writes
// goes through SPI in the current transaction, so it commits or rolls back
// with the caller's work (SPEC §3, third question).
#pragma once

#include "core/batch_plan.hpp"
#include "core/buffer_pool.hpp"
#include "core/decision.hpp"
#include "core/decode.hpp"
#include "core/envelope.hpp"
#include "core/json.hpp"
#include "pg/guard.hpp"
#include "pg/spi.hpp"

#include <map>
#include <memory>
#include <optional>
#include <charconv>
#include <string>
#include <string_view>

namespace cdc::pg {

struct Target;

using cdc::Counters; // per-target outcome counts (core/batch_plan.hpp)

// An image as an input path delivers it: column name -> text input form,
// NULL, or unavailable (not sent by the source).  `json` is the image as
// received, kept for cdc.conflicts and for delete outbox payloads.
struct RawImage {
	// Mutable only for Release(): the engine takes requests as const.
	mutable cdc::ImageValues values;
	// The image's JSON object as received, for what keeps it (cdc.conflicts,
	// cdc.dead_letter, the outbox payload of a delete whose row the
	// destination never had), made on first use, not per change: the
	// Debezium object handed over by SetSource (the envelope's tree, kept
	// instead of its text: most changes never need it) serialised, else
	// built from the values (unavailable ones as "__unchanged_toast__").
	// Throws (XX000, an internal error) after Release().
	const std::string &Json() const;
	void SetSource(cdc::Json obj) { source_ = std::move(obj); }
	// The same for an image read in place (the jsonb intake): its object is
	// node `node` of `view`, which must outlive the image (Json() reads it
	// through JsonView::Tree).
	void SetSource(const cdc::JsonView *view, cdc::JsonView::Node node)
	{
		view_ = view;
		node_ = node;
	}
	// Value i (values[i]) is the string of member i of the source object,
	// moved out of it (Json::TakeMemberString): Json() puts it back.
	void MovedFromSource(size_t i) { moved_.push_back(i); }
	// Drops the values' texts and the source object once the change is
	// written and nothing needs the image's JSON any more (an event-sized
	// value is not held while the next statements run).  Returns the bytes
	// freed (for TrimFreedMemory).
	size_t Release() const;
	bool Released() const { return released_; }

  private:
	mutable std::optional<std::string> json_;
	mutable std::optional<cdc::Json> source_;
	mutable const cdc::JsonView *view_ = nullptr;
	cdc::JsonView::Node node_ = nullptr;
	std::vector<size_t> moved_;
	mutable bool released_ = false;
};

// What the engine calls while it applies: once per change applied one by
// one (ApplyChange, every mode), per set-based segment, and per row its
// direct writes find or write (table_write.cpp).  The apply worker
// installs one that keeps its source connection alive during a long batch
// (docs/worker.md, "A long batch and wal_sender_timeout"); no other backend
// does.  The hook is PostgreSQL-regime code (it may ereport) that must
// cost next to nothing when it has nothing to do: it rate-limits itself.
using ApplyProgressHook = void (*)(void);
void SetApplyProgressHook(ApplyProgressHook hook) noexcept;
// Calls the hook, if any: NoteApplyProgress from C++ (through PgCall),
// NoteApplyProgressPg from the PostgreSQL-regime *Pg functions.
void NoteApplyProgress();
void NoteApplyProgressPg(void);

// One change, independent of the input format (Debezium envelope, pgoutput).
struct ChangeRequest {
	Oid target = InvalidOid;
	Op op = Op::Create;                    // c, u, d, r (snapshot row) or t
	std::optional<RawImage> before;        // required for d (key columns at least)
	std::optional<RawImage> after;         // required for c, u, r
	Version version;                       // ignored when the mapping orders by version_column
	SourceInfo source;                     // source identity; source.name is the source id
	std::optional<int64_t> total_order;    // position in the source transaction, if known
	std::optional<std::string> delivery_key; // nullopt: derived from the source identity
	// A delete read off a source snapshot (cdc.resync: the key is not in the
	// source's snapshot): handled like a snapshot row (op r): state only, no
	// outbox row, handlers see is_snapshot, counted in snapshot_rows.
	bool snapshot_delete = false;
	// A truncate (op t) whose source statement had RESTART IDENTITY
	// (pgoutput's flag): the target's owned sequences restart too, where
	// the target is emptied by TRUNCATE, as PostgreSQL's own apply does.
	bool restart_identity = false;
	bool IsSnapshot() const { return op == Op::Read || snapshot_delete; }
};

// The engine is the ContextSource of the error context while it applies:
// per change it keeps the fields of its CONTEXT line (label, target,
// delivery key) and formats the line only when a message needs it.
class ApplyEngine final : private ContextSource {
  public:
	// Opens the SPI connection.  One engine per entry-point call.
	ApplyEngine();
	ApplyEngine(const ApplyEngine &) = delete;
	ApplyEngine &operator=(const ApplyEngine &) = delete;
	~ApplyEngine();

	// Applies one Debezium value (the JSON of a Kafka record value; JSON null
	// is a Kafka tombstone).  target: InvalidOid = resolve from cdc.mapping by
	// source.schema/source.table.  delivery_key: nullopt = derive it from the
	// source identity (envelope.hpp, DeriveDeliveryKey).
	// Errors: see docs/sql-reference.md (22P02, 22023, 42P01, 42P10, 42501,
	// 42703, the column type's own input errors).
	// The event is handed over: its images are moved into the request (each
	// kept as its tree, serialised only if something keeps the image's JSON),
	// so that a large event is not held twice.
	// An event given as a JsonView (the jsonb intake, pg/jsonb_view.hpp) is
	// read in place: the view must outlive the call.
	struct EventInput {
		Json tree;                        // the event (a tree), unless `view` is set
		const cdc::JsonView *view = nullptr;
	};
	Outcome ApplyDebezium(EventInput event, Oid target, const std::optional<std::string> &delivery_key);

	// Applies one change in any input format: the engine behind every path.
	// Errors as for ApplyDebezium; field paths are "after.<column>" and
	// "before.<column>".
	Outcome ApplyChange(const ChangeRequest &req);

	// The target of a source table: the cdc.mapping row for (schema, table)
	// accepting `source_name`, else (when same_name_fallback) the destination
	// table with the same schema and name.  Errors 42P01 when there is none.
	Oid ResolveSourceTable(const std::string &source_name, const std::string &schema, const std::string &table,
	                       bool same_name_fallback);

	// The worker's guard for a source table whose replica identity does not
	// carry the destination key (docs/worker.md, "Replica identity and the
	// destination key"): the first key column of state-mode target `relid`
	// that is not among `identity_columns` (the source's replica-identity
	// column names, as pgoutput's RELATION message flags them), or nullopt
	// when all are (and for history and handler mappings).
	std::optional<std::string> KeyColumnOutsideIdentity(Oid relid, const std::vector<std::string> &identity_columns);

	// An update of such a table carries no old value of `column`, so it
	// cannot tell whether the update changed the key: it is only applied
	// when target `relid` has a row with the after-image's key (the key did
	// not change).  Otherwise ERROR 55000 naming the column and the key,
	// with what to do; as PostgreSQL's own subscriber refuses such tables
	// ("publisher did not send replica identity column expected by the
	// logical replication target relation").  The caller applies what it
	// has queued first.  Errors of the key's conversion as for ApplyChange.
	void RequireRowAtKey(Oid relid, const RawImage &after, const std::string &column);
	// Whether the target `relid` has a row at the key of `img` (`which`:
	// "before" or "after", for error messages), read as the target's
	// statements run.  For the worker's updates of a table whose inserts
	// are not published (docs/worker.md, "The publications' scope", the
	// operations); the caller applies what it has queued first.
	// Errors of the key's conversion as for ApplyChange.
	bool HasRowAtKey(Oid relid, const RawImage &img, const char *which);
	// The destination key of `img` (`which`: "before" or "after") as the
	// entity record's compact key text, for the worker's rows displaced
	// within one source transaction (docs/worker.md, "Keys that move
	// within one statement"); nullopt for a target that is not in state
	// mode (history and handler mappings keep no rows by key).  Errors of
	// the key's conversion as for ApplyChange.
	std::optional<std::string> StateKeyText(Oid relid, const RawImage &img, const char *which);
	// Whether `a` and `b` (images of one source table) carry byte-equal
	// texts for every key column of state-mode target `relid`: then their
	// keys are equal without converting them (StateKeyText), as most of
	// the worker's updates of a REPLICA IDENTITY FULL table find.  False
	// when a key text differs, is missing or unavailable, and for other
	// modes: the caller compares StateKeyText's keys (equal values may be
	// spelled differently).  No error.
	bool SameKeyTexts(Oid relid, const RawImage &a, const RawImage &b);
	// Digests for the worker's displaced rows: the md5 of the output texts
	// (as an array's text) of the target's columns `img` carries, except
	// generated ones, in column order.  ImageDigest: of `img`'s own values,
	// read by the columns' input functions (nullopt when one is
	// unavailable); RowDigestAtKey: of the row the target has at `img`'s key
	// (nullopt: no row; the caller applies what it has queued first).
	// Errors of the image's conversion as for ApplyChange.
	std::optional<std::string> ImageDigest(Oid relid, const RawImage &img, const char *which);
	std::optional<std::string> RowDigestAtKey(Oid relid, const RawImage &img, const char *which);
	// Counts one change of target `relid` as `ignored` in this engine's
	// counters (written at Finish, with the transaction): the worker's
	// update that HasRowAtKey found no row for, which it does not apply
	// (docs/semantics.md, "Outcomes").  No error.
	void CountIgnored(Oid relid) { counters_[relid].ignored++; }

	// The name of another subscription of this database (not
	// `subscription`) of the source cluster `system_id` (or of one not
	// known yet: no slot_system_id) with a published table whose target is
	// `relid` (its cdc.mapping row, else the table of the same name), or
	// nullopt.  Its rows carry the same source id (pg:<system identifier>):
	// it reads the same source cluster (another database, another row
	// filter of the table), so a copy cannot tell them from its own rows the
	// source deleted: table_copy.cpp then deletes none (found by a hostile
	// test: the copy of a second subscription, whose publication filtered
	// another part of the table, deleted every row of the first).
	std::optional<std::string> OtherSubscriptionWriting(Oid relid, const std::string &subscription,
	                                                    const std::string &system_id);

	// The keys of target `relid`'s rows that a copy of its source table at
	// version `v` (the worker's snapshot rows, {epoch, S, 0, 0}) did not
	// refresh: its live entity records from source `source_name` older than
	// `v`, each as the key columns' texts (names in *key_names).  The copy
	// had every row the source published at S, so these rows were deleted
	// there, or left the publication's row filter, while the destination
	// did not follow the table (dropped from the publication and added
	// back, an accepted gap): table_copy.cpp deletes them as snapshot
	// deletes at S.  None for a stream-ordered target (no records).
	std::vector<std::vector<std::string>> KeysOlderThan(Oid relid, const std::string &source_name, const Version &v,
	                                                    std::vector<std::string> *key_names);

	// Applies a batch of Debezium values in one call (cdc_apply_batch):
	// events[i] is one Kafka record value (JSON null: a Kafka tombstone),
	// delivery_keys[i] its delivery key (nullopt: derived; the vector may be
	// empty).  Returns the outcome of every event, in input order.  The rows,
	// entity records, tombstones, ledger rows, outbox rows, conflicts and
	// counters equal applying the events one by one in order
	// (docs/semantics.md, "Batches").  Errors as for ApplyDebezium, with
	// "event N of the batch" in the error context; the caller's transaction
	// rolls back whole.
	//
	// by_offset (nullptr: each delivery claimed by its digest in cdc.ledger):
	// the events were read from one ordered source partition at
	// by_offset->offsets[i] (one per event, strictly increasing; the caller
	// made delivery_keys[i] partition:offset), and the deliveries are claimed
	// as offset ranges per target (ClaimOffsetRanges, state_store.hpp).
	struct OffsetClaims {
		std::string partition;
		std::vector<int64_t> offsets;
	};
	std::vector<Outcome> ApplyDebeziumBatch(std::vector<EventInput> events, Oid target,
	                                        const std::vector<std::optional<std::string>> &delivery_keys,
	                                        const OffsetClaims *by_offset = nullptr);

	// The batch engine behind it, for any input path: applies `reqs` in order
	// with the result of one-by-one application.  The delivery keys are
	// claimed in input order; several changes of one entity are merged into
	// the newest where nothing can observe the difference (CollapseAllowed in
	// segment.cpp); everything else is applied change by change.  positions[i]:
	// the 1-based input position of reqs[i], named in the error context.
	std::vector<Outcome> ApplyChanges(const std::vector<ChangeRequest> &reqs, const std::vector<size_t> &positions);

	// Queues a change for ApplyQueued(): the worker's way into the batch
	// engine.  position: the change's 1-based position in its source
	// transaction (named in the error context).  The caller applies the
	// queue before anything that must see the changes: the end of the source
	// transaction, a fault point, Finish().  No PostgreSQL call, no error.
	// The request is moved into the queue (no copy of its images).
	void Enqueue(ChangeRequest &&req, size_t position);
	size_t QueuedChanges() const { return queued_.size(); }
	// Bytes of the queued images (column names, values and JSON forms): what
	// the queue holds in memory, give or take the fixed per-change overhead.
	size_t QueuedBytes() const { return queued_bytes_; }
	// Spent buffers of applied queued requests, for the worker's next ones
	// (core/buffer_pool.hpp): an image's values vector to write over with an
	// ImageWriter, an empty string for a delivery key.  With a pool set
	// (the worker's, which outlives its engines: one per group), ApplyQueued
	// gives back what its requests held; without one (every other caller)
	// these return fresh ones and nothing is kept.
	void UseBufferPool(cdc::BufferPool *pool) { buffer_pool_ = pool; }
	cdc::ImageValues TakeImageValues() { return buffer_pool_ ? buffer_pool_->TakeValues() : cdc::ImageValues(); }
	std::string TakeKeyBuffer() { return buffer_pool_ ? buffer_pool_->TakeString() : std::string(); }

	// Applies the queued changes with ApplyChanges() and empties the queue
	// (also when it throws: the transaction is then aborted anyway).  Errors
	// as for ApplyChanges.
	void ApplyQueued();

	// Applies what is still queued, adds the counts to cdc.counters and
	// closes SPI.  Call exactly once on success; on error the transaction
	// aborts and nothing needs flushing.
	void Finish();

	// The worker's identity (docs/security.md, "The worker's identity"):
	// changes are applied for subscription `subscription` owned by `owner`.
	// run_as_owner: every statement on a target runs as `owner`; otherwise
	// as the target's owner in a security-restricted operation (when the
	// owner is a member of it; refused with 42501 when it is not), unless
	// the target's owner is also a member of `owner` (then as `owner`).
	// Without a call (the SQL path) everything runs as the calling user.
	// The mappings' source_name is compared with `subscription`.
	// `restricted`: the code of every target runs in a security-restricted
	// operation with a GUC nest level, also where it runs as `owner`: for
	// cdc.resync, which applies in its caller's session (a superuser's), so
	// that no trigger can leave a setting, a temporary object, a deferred
	// trigger or a held cursor behind for the caller to run
	// (test/t/068_worker_deferred_trigger.pl, 070_resync_session_state.pl).
	void SetWorkerIdentity(Oid owner, bool run_as_owner, std::string subscription, bool restricted = false)
	{
		worker_identity_ = true;
		owner_ = owner;
		run_as_owner_ = run_as_owner;
		subscription_ = std::move(subscription);
		always_restricted_ = restricted;
	}

	// Label used in error context ("event 3 of the batch").
	void SetEventLabel(std::string label)
	{
		event_label_ = std::move(label);
		label_position_ = 0;
	}

	// Marks this engine as the intake of one complete ordered stream (the
	// worker's pgoutput stream): only such an engine may apply changes to
	// stream-ordered targets (docs/semantics.md, "Stream ordering"); any
	// other caller gets 55000 for them.
	void SetStreamIntake(bool on) { stream_intake_ = on; }

	// How error contexts name a position in ApplyChanges (default "event",
	// "of the batch": "event 3 of the batch"; the worker: "change 3 of the
	// source transaction").
	void SetPositionNames(std::string unit, std::string scope)
	{
		position_unit_ = std::move(unit);
		position_scope_ = std::move(scope);
	}

  private:
	// ResolveSourceTable's last answer, returned again for the same source
	// table while no invalidation reached the target cache (changes of one
	// table come in runs): three string comparisons instead of building the
	// cache's key and looking it up.
	struct LastResolved {
		std::string source_name, schema, table;
		bool same_name_fallback = false;
		uint64_t invalidations = 0;
		Oid target = InvalidOid;
	};
	std::optional<LastResolved> last_resolved_;
	ChangeRequest DebeziumRequest(ChangeEvent &ev, Oid target, const std::optional<std::string> &delivery_key);
	// The target named for a record that is not a change: checked as for a change (engine.cpp).
	void CheckIgnoredTarget(Oid target_arg);
	// The dedup claim of the change ApplyChange is applying: true when the
	// claim is new.  The batch's claim when it made one (pending_claim_),
	// else a claim in cdc.ledger (pg/state_store.hpp, ClaimDelivery).
	bool TakeClaim(const std::string &delivery_key, Oid relid, int32_t now_s);
	void ApplySegment(const std::vector<ChangeRequest> &reqs, const std::vector<size_t> &positions, size_t begin,
	                  size_t end, std::vector<Outcome> &out);
	Target &LoadTarget(Oid relid);
	void LockForTruncate(Oid relid);
	// Empties target `t` as `as` with TRUNCATE: at once, or, while a run of
	// consecutive truncate changes is applied (ApplyChanges), added to that
	// run's statement, so that tables linked by foreign keys truncated
	// together at the source are truncated together here, as one TRUNCATE
	// statement does (PostgreSQL refuses to truncate a referenced table
	// alone).  FlushTruncates runs the statements: one per role and
	// `restart_identity` (RESTART IDENTITY: the tables' owned sequences
	// restart, ChangeRequest::restart_identity), tables in the order of the
	// changes.
	void TruncateTarget(const Target &t, const RunAs &as, bool restart_identity = false);
	void FlushTruncates();
	// cdc_apply(): the caller's TRUNCATE privilege, when a truncate event may
	// run TRUNCATE (LockForTruncate, before the lock).  Errors: 42501.
	void CheckTruncateBeforeLock(Oid relid);
	// Before the first lock on a target the SQL path checks the caller's
	// privileges on it, so a role cannot make others queue behind a lock on a
	// table it may not write (42501; 42P01 when it does not exist).
	void CheckBeforeLock(Oid relid);
	void FailHasRules(const char *display, Oid relid);
	void ReadPartitionTree(Target &t);
	void CheckPartitionTree(const Target &t) const;
	// Once per target per call: who the target's statements run as, after
	// checking that role's privileges and that row-level security does not
	// apply to it (42501 otherwise; docs/security.md).
	const RunAs &Authorize(const Target &t);
	// A mapping with source_name accepts only that source's changes (42501).
	void CheckSource(const Target &t, const ChangeRequest &req) const;
	Oid ResolveTarget(const cdc::SourceInfo &source);
	Oid ResolveUncached(const std::string &source_name, const std::string &schema, const std::string &table,
	                    bool same_name_fallback);
	// The error context of what follows (SetErrorContext): the event label,
	// the target and the delivery key ("" or nullopt: none).
	void SetContext(const Target *t, std::string_view delivery_key);
	void SetContextKey(const Target *t, const std::optional<std::string> &delivery_key);
	// Stream ordering: 55000 unless this engine is a stream intake.
	void RequireStreamIntake(const Target &t) const;
	// The high-water mark of (target, source) for this transaction: locked
	// and read on first use (LockStreamMark), then kept here; `running` moves
	// with every applied change and is written back by Finish().
	struct StreamMark {
		Version running;
		bool dirty = false;
	};
	StreamMark &Mark(const Target &t, const std::string &source);
	void WriteMarks();

	std::map<Oid, std::shared_ptr<Target>> targets_; // this call's targets (shared with the backend's cache, target.cpp)
	std::map<Oid, Counters> counters_;
	std::map<std::string, int32_t> source_ids_; // cdc.source ids used by this call (pg/state_store.hpp)
	struct Access {
		uint64_t role_changes = 0; // role_changes (target.cpp) when decided
		RunAs as;
	};
	std::map<Oid, Access> access_;              // Authorize() of this call's targets
	bool worker_identity_ = false;              // SetWorkerIdentity
	Oid owner_ = InvalidOid;
	bool run_as_owner_ = false;
	bool always_restricted_ = false; // SetWorkerIdentity's `restricted`
	std::string subscription_;
	std::string PositionLabel(size_t position) const
	{
		std::string s;
		AppendPositionLabel(s, position);
		return s;
	}
	void AppendPositionLabel(std::string &s, size_t position) const
	{
		char digits[24];
		char *end = std::to_chars(digits, digits + sizeof digits, position).ptr;
		s.reserve(s.size() + position_unit_.size() + position_scope_.size() + size_t(end - digits) + 2);
		s += position_unit_;
		s += ' ';
		s.append(digits, size_t(end - digits));
		s += ' ';
		s += position_scope_;
	}
	// SetEventLabel(PositionLabel(position)), kept as the number (per change
	// on the batch and worker paths): formatted only if a message needs it.
	// Positions are 1-based.
	void SetEventPosition(size_t position) { label_position_ = position; }
	// ContextSource: "cdc_apply <label>, target table <t>, delivery key "<k>""
	// of the last SetContext.
	size_t FormatContext(char *buf, size_t size) const noexcept override;

	std::string event_label_;   // SetEventLabel's text, when label_position_ is 0
	size_t label_position_ = 0; // SetEventPosition's, else 0
	// What SetContext recorded for FormatContext: copies (what they were
	// copied from may be gone when the message is formatted), but for the
	// target, one of targets_ (kept as long as the engine).
	size_t context_position_ = 0;    // label_position_ at SetContext, 0: context_label_
	std::string context_label_;      // event_label_ at SetContext (stage labels: per segment, not per change)
	const Target *context_target_ = nullptr; // its `qualified` names it; nullptr: none
	std::string context_key_;        // the delivery key, clipped to 200 bytes
	std::string position_unit_ = "event";
	std::string position_scope_ = "of the batch";
	std::vector<ChangeRequest> queued_;      // Enqueue() .. ApplyQueued()
	std::vector<size_t> queued_positions_;
	size_t queued_bytes_ = 0;
	cdc::BufferPool *buffer_pool_ = nullptr; // UseBufferPool
	std::optional<bool> pending_claim_;
	// ApplyChanges' claims made beforehand (claims by offset range), per
	// request: 1 a new claim, 0 processed before, kClaimByDigest not made
	// (claimed by its digest as usual); empty: every request by digest.
	std::vector<char> claims_made_;
	static constexpr char kClaimByDigest = 2;
	// Claims by offset range for requests [0, n) of `reqs` as their batch
	// or queue is applied (claims_made_): for cdc_apply_batch() with
	// source_partition (by_offset), every request; for the worker's queue
	// (by_offset nullptr), the changes of each source transaction with at
	// least kMinWorkerRangeClaim changes to entity-ordered targets in the
	// queue, as the partition pgoutput:<source>:<commit LSN> at offsets
	// = their positions (docs/semantics.md, "Claims by offset range").
	void ClaimByOffsetRange(const std::vector<ChangeRequest> &reqs, const std::vector<size_t> &positions,
	                        const OffsetClaims *by_offset);
	static constexpr size_t kMinWorkerRangeClaim = 16;
	// ApplyChange(reqs[i]) with the claim made beforehand for request i
	// (claims_made_), when there is one; else ApplyChange claims by digest.
	Outcome ApplyChangeWithClaimMade(const std::vector<ChangeRequest> &reqs, size_t i);
	bool stream_intake_ = false;
	std::map<std::pair<Oid, int32_t>, StreamMark> marks_;
	// A segment's stream decision for a change it hands to ApplyChange (the
	// mark has moved past the change meanwhile): applied.
	bool pending_stream_apply_ = false;
	bool finished_ = false;
	// TruncateTarget's pending tables (qualified names), roles and
	// RESTART IDENTITY, while grouping_truncates_.
	struct PendingTruncate {
		std::string table;
		RunAs as;
		bool restart_identity;
	};
	std::vector<PendingTruncate> pending_truncates_;
	bool grouping_truncates_ = false;
};

} // namespace cdc::pg
