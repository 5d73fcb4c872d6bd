// The ApplyEngine facade (see engine.hpp and docs/semantics.md): one
// engine per entry-point call or worker transaction.  Owns the call's
// targets, counters, source ids and queue; parses Debezium envelopes into
// ChangeRequests; splits a batch into segments at truncates (each segment
// goes to segment.cpp, each truncate to single.cpp); names the change being
// applied in the error context; adds the counts to cdc.counters (Finish).
//
// Structure of one event (ApplyDebezium):
//   parse envelope (pure) -> resolve target + mapping (target.cpp) ->
//   privilege check -> convert the images' key columns (image.cpp) -> dedup
//   claim -> per entity: lock, Decide() (pure), convert the other values
//   and hash them (applied changes only), write state, mutate target,
//   outbox row (single.cpp) -> counters.
//
// Glue, C++ regime.  Must not hold PostgreSQL resources across calls: SPI
// is opened by the constructor and closed by Finish().
#include "pg/apply/engine.hpp"

#include "core/envelope.hpp"
#include "core/errors.hpp"
#include "pg/apply/internal.hpp"
#include "pg/apply/target.hpp"
#include "pg/spi.hpp"
#include "pg/apply/counters.hpp"
#include "pg/apply/image.hpp"
#include "pg/apply/outbox.hpp"
#include "pg/apply/state_store.hpp"
#include "pg/apply/table_write.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/backendid.h"
}

#include <algorithm>
#include <cstring>
#include <system_error>

namespace cdc::pg {

namespace {
ApplyProgressHook progress_hook = nullptr; /* a plain function pointer: set once by the worker */
} // namespace

void
SetApplyProgressHook(ApplyProgressHook hook) noexcept
{
	progress_hook = hook;
}

void
NoteApplyProgress()
{
	if (progress_hook != nullptr)
		PgCall([]() { progress_hook(); });
}

void
NoteApplyProgressPg(void)
{
	if (progress_hook != nullptr)
		progress_hook();
}

ApplyEngine::ApplyEngine()
{
	/* not from user code run inside one of the engine's speculative insertions (table_write.hpp) */
	PgCall([]() { RefuseApplyDuringSpeculativeInsertionPg(); });
	deferred_outbox = nullptr; /* a failed batch of an earlier call may have left it set */
	Connect();
}

ApplyEngine::~ApplyEngine()
{
	/* an error raised after the engine is gone (a C++ exception unwinds it first) still names what failed */
	ReleaseErrorContextSource(this);
}

Outcome
ApplyEngine::ApplyDebezium(EventInput event, Oid target_arg, const std::optional<std::string> &delivery_key_arg)
{
	SetContextKey(nullptr, delivery_key_arg);
	ChangeRequest req;
	{
		ChangeEvent ev = event.view ? ParseDebeziumEnvelope(*event.view) : ParseDebeziumEnvelope(std::move(event.tree));
		if (ev.ignored) {
			CheckIgnoredTarget(target_arg);
			counters_[target_arg].ignored++;
			return Outcome::Ignored;
		}
		Oid target =
			OidIsValid(target_arg) ? target_arg : ResolveTarget(ev.source);
		if (ev.op == Op::Truncate)
			LockForTruncate(target);
		req = DebeziumRequest(ev, target, delivery_key_arg);
	} /* the envelope's images go: the request holds what was decoded from them */
	return ApplyChange(req);
}

/*
 * A record that is not a change (a Kafka tombstone, transaction metadata, a
 * message) is counted as ignored under the target the caller named: that
 * target is checked as for a change (LoadTarget: a relation that exists, a
 * permanent logged table, not a catalog or a table of cdc_apply, the
 * caller's privileges and row-level security, not stream-ordered).  It was
 * not: a role without privileges on a table bumped its counters, and a
 * catalog, a sequence, a view or a temporary table (whose counters outlive
 * it) got a cdc.stats row (sql/new_user_s32.sql).  Without a target such
 * records count under target 0, as before.
 */
void
ApplyEngine::CheckIgnoredTarget(Oid target_arg)
{
	if (OidIsValid(target_arg))
		(void) LoadTarget(target_arg);
}

ChangeRequest
ApplyEngine::DebeziumRequest(ChangeEvent &ev, Oid target, const std::optional<std::string> &delivery_key)
{
	ChangeRequest req;
	req.target = target;
	Target &t = LoadTarget(req.target);
	SetContextKey(&t, delivery_key);
	req.op = ev.op;
	req.source = ev.source;
	req.total_order = ev.total_order;
	req.delivery_key = delivery_key;
	/* the images are handed over to the request (RawImage keeps the object for its JSON) */
	if (ev.after)
		req.after = DecodeJsonImage(t, std::move(*ev.after), ev.after_schema ? &*ev.after_schema : nullptr, "after");
	else if (ev.after_node) /* read in place (the jsonb intake) */
		req.after = DecodeViewImage(t, *ev.view, ev.after_node, ev.after_schema ? &*ev.after_schema : nullptr, "after");
	if (ev.before)
		req.before = DecodeJsonImage(t, std::move(*ev.before), ev.before_schema ? &*ev.before_schema : nullptr, "before");
	else if (ev.before_node)
		req.before = DecodeViewImage(t, *ev.view, ev.before_node, ev.before_schema ? &*ev.before_schema : nullptr, "before");
	if (t.version_col < 0 && !(ev.op == Op::Truncate && t.mapping.truncate_ignore))
		req.version = DeriveDebeziumVersion(ev, t.mapping.epoch);
	return req;
}

void
ApplyEngine::SetContext(const Target *t, std::string_view delivery_key)
{
	/*
	 * Per change on the batch and worker paths: the fields are kept (the key
	 * copied into a string that keeps its capacity), the line is formatted
	 * only if a message needs it (FormatContext).
	 */
	context_position_ = label_position_;
	if (label_position_ == 0)
		context_label_ = event_label_;
	/*
	 * The target by reference: every Target handed here is one of targets_,
	 * which only grows and keeps each entry (and its `qualified`, set once
	 * when the target is read) until the engine is gone; the destructor
	 * formats the line (ReleaseErrorContextSource) before targets_ goes.
	 * The delivery key is copied: the request it belongs to may be gone when
	 * the line is formatted (a queue applied, then a deferred trigger's error
	 * at commit).
	 */
	context_target_ = t;
	/*
	 * A derived delivery key holds the entity key, which may be kilobytes
	 * long (a long text key): clipped, so that the context line stays
	 * readable (found by a fresh-user run: a 5,210-byte line for a
	 * 5,120-byte key).  Its control characters are written as JSON
	 * escapes: a key holding a newline split the line and printed one of
	 * its own choosing (fresh-user review h4, regress new_user_s31).
	 */
	if (delivery_key.size() > kContextKeyBytes || HasControlChars(delivery_key))
		context_key_ = ForContextLine(delivery_key, kContextKeyBytes);
	else
		context_key_.assign(delivery_key.data(), delivery_key.size());
	SetErrorContextSource(this);
}

size_t
ApplyEngine::FormatContext(char *buf, size_t size) const noexcept
{
	/* no allocation, nothing that raises: called from the error context callback */
	size_t len = 0;
	auto put = [&](std::string_view piece) {
		const size_t n = std::min(piece.size(), size - 1 - len);
		std::memcpy(buf + len, piece.data(), n);
		len += n;
	};
	put("cdc_apply");
	if (context_position_ != 0) {
		char digits[24];
		char *end = std::to_chars(digits, digits + sizeof digits, context_position_).ptr;
		put(" ");
		put(position_unit_);
		put(" ");
		put(std::string_view(digits, size_t(end - digits)));
		put(" ");
		put(position_scope_);
	} else if (!context_label_.empty()) {
		put(" ");
		put(context_label_);
	}
	if (context_target_ != nullptr) {
		put(", target table ");
		put(context_target_->qualified);
	}
	if (!context_key_.empty()) {
		put(", delivery key \"");
		put(context_key_);
		put("\"");
	}
	buf[len] = '\0';
	return len;
}

void
ApplyEngine::SetContextKey(const Target *t, const std::optional<std::string> &delivery_key)
{
	SetContext(t, delivery_key ? std::string_view(*delivery_key) : std::string_view());
}

void
ApplyEngine::Finish()
{
	if (finished_)
		return;
	ApplyQueued();
	WriteMarks();
	finished_ = true;
	/* written once per transaction, at its commit (counters.hpp) */
	AddTransactionCounts(counters_);
	cdc::pg::Finish();
}

void
ApplyEngine::RequireStreamIntake(const Target &t) const
{
	if (!stream_intake_)
		Fail("55000", "table " + t.qualified + " is stream-ordered: only its subscription's worker may apply changes to it",
		     "A stream-ordered target is written by one ordered stream, whose high-water mark replaces the per-entity "
		     "records (docs/semantics.md, \"Stream ordering\").",
		     "Switch it to entity ordering with cdc.set_ordering(target, 'entity') to apply events through cdc_apply().");
}

ApplyEngine::StreamMark &
ApplyEngine::Mark(const Target &t, const std::string &source)
{
	const int32_t src = SourceId(source, source_ids_);
	auto key = std::make_pair(t.relid, src);
	auto it = marks_.find(key);
	if (it == marks_.end()) {
		/*
		 * Once per cached target (its metadata is read again after a change of
		 * its mapping; a worker reads it afresh at each start, which a change
		 * of its publications or tables causes): the subscriptions feeding it
		 * share this mark only when they receive the same changes (TAP 157).
		 */
		if (!t.stream_scope_checked) {
			CheckStreamScope(t.relid, t.qualified, source);
			t.stream_scope_checked = true;
		}
		it = marks_.emplace(key, StreamMark{LockStreamMark(t.relid, src, t.qualified, source), false}).first;
	}
	return it->second;
}

void
ApplyEngine::WriteMarks()
{
	for (auto &[key, m] : marks_)
		if (m.dirty) {
			WriteStreamMark(key.first, key.second, m.running, TransactionSeconds());
			m.dirty = false;
		}
}

namespace {

// Empties the claims made beforehand (ApplyEngine::claims_made_) when the
// batch or queue they belong to is done, also when an error unwinds: plain
// C++, nothing of PostgreSQL.
struct ClaimsReset {
	std::vector<char> &claims;
	~ClaimsReset() { claims.clear(); }
};

} // namespace

std::vector<Outcome>
ApplyEngine::ApplyDebeziumBatch(std::vector<EventInput> events, Oid target_arg,
                                const std::vector<std::optional<std::string>> &delivery_keys,
                                const OffsetClaims *by_offset)
{
	auto dk_of = [&](size_t i) {
		return i < delivery_keys.size() ? delivery_keys[i] : std::optional<std::string>();
	};
	std::vector<Outcome> out(events.size(), Outcome::Ignored);
	struct Parsed {
		size_t index;
		ChangeEvent ev;
		Oid target;
	};
	std::vector<Parsed> parsed;
	parsed.reserve(events.size()); /* a ChangeEvent is large: not moved as the vector grows */
	for (size_t i = 0; i < events.size(); i++) {
		SetEventPosition(i + 1);
		SetContextKey(nullptr, dk_of(i));
		ChangeEvent ev = events[i].view ? ParseDebeziumEnvelope(*events[i].view) : ParseDebeziumEnvelope(std::move(events[i].tree));
		if (ev.ignored) {
			CheckIgnoredTarget(target_arg);
			counters_[target_arg].ignored++;
			continue;
		}
		Oid target = OidIsValid(target_arg) ? target_arg : ResolveTarget(ev.source);
		parsed.push_back(Parsed{i, std::move(ev), target});
	}
	/* Truncated targets are locked before anything else (LockForTruncate). */
	/*
	 * Each loop below names its event in the error context before it loads
	 * the event's target (LoadTarget checks privileges, row-level security,
	 * stream ordering): else an error there would carry the context of the
	 * event handled before.
	 */
	for (const Parsed &p : parsed)
		if (p.ev.op == Op::Truncate) {
			SetEventPosition(p.index + 1);
			SetContextKey(nullptr, dk_of(p.index));
			LockForTruncate(p.target);
		}
	std::vector<ChangeRequest> reqs;
	std::vector<size_t> positions;
	reqs.reserve(parsed.size());
	positions.reserve(parsed.size());
	for (Parsed &p : parsed) {
		SetEventPosition(p.index + 1);
		SetContextKey(nullptr, dk_of(p.index));
		reqs.push_back(DebeziumRequest(p.ev, p.target, dk_of(p.index)));
		positions.push_back(p.index + 1);
		p.ev.before.reset(); /* decoded into the request: not held twice */
		p.ev.after.reset();
	}
	ClaimsReset reset_claims{claims_made_};
	if (by_offset)
		ClaimByOffsetRange(reqs, positions, by_offset);
	std::vector<Outcome> applied = ApplyChanges(reqs, positions);
	for (size_t j = 0; j < applied.size(); j++)
		out[positions[j] - 1] = applied[j];
	return out;
}

void
ApplyEngine::Enqueue(ChangeRequest &&req, size_t position)
{
	for (const std::optional<RawImage> *img : {&req.before, &req.after})
		if (*img) {
			for (const auto &[name, value] : (*img)->values)
				queued_bytes_ += name.size() + value.text.size();
		}
	queued_.push_back(std::move(req));
	queued_positions_.push_back(position);
}

void
ApplyEngine::ApplyQueued()
{
	if (queued_.empty())
		return;
	std::vector<ChangeRequest> reqs;
	std::vector<size_t> positions;
	reqs.swap(queued_);
	positions.swap(queued_positions_);
	queued_bytes_ = 0;
	ClaimsReset reset_claims{claims_made_};
	if (stream_intake_)
		ClaimByOffsetRange(reqs, positions, nullptr);
	ApplyChanges(reqs, positions);
	/*
	 * The applied requests' images and delivery keys are spent: their
	 * vectors and small string buffers go to the pool for the worker's
	 * next changes (TupleImage, StampNextChange), instead of a free here
	 * and a malloc there per value (issue 13; docs/benchmarks.md, the
	 * twenty-fourth round).  BufferPool drops every buffer over 64 bytes
	 * and keeps at most its byte limit.
	 */
	if (buffer_pool_)
		for (ChangeRequest &r : reqs) {
			for (std::optional<RawImage> *img : {&r.before, &r.after})
				if (*img)
					buffer_pool_->GiveValues(std::move((*img)->values));
			if (r.delivery_key)
				buffer_pool_->GiveString(std::move(*r.delivery_key));
		}
	/*
	 * The emptied vectors go back to the queue with their capacity: else
	 * every batch grows the queue again from nothing, moving its requests
	 * at each doubling (about 1 % of the worker's CPU).  What the queue
	 * keeps is bounded by cdc.apply_batch_changes requests (their images
	 * are freed by clear()).
	 */
	reqs.clear();
	positions.clear();
	if (queued_.empty() && queued_.capacity() < reqs.capacity()) {
		queued_.swap(reqs);
		queued_positions_.swap(positions);
	}
}

void
ApplyEngine::ClaimByOffsetRange(const std::vector<ChangeRequest> &reqs, const std::vector<size_t> &positions,
                                const OffsetClaims *by_offset)
{
	claims_made_.assign(reqs.size(), kClaimByDigest);
	/* partition -> the requests claimed in it, in input order */
	std::map<std::string, std::vector<size_t>> parts;
	std::vector<int64_t> offset(reqs.size());
	std::string_view last_partition; /* the previous change's: a transaction's changes are consecutive */
	std::vector<size_t> *last_members = nullptr;
	for (size_t j = 0; j < reqs.size(); j++) {
		if (by_offset) {
			offset[j] = by_offset->offsets[positions[j] - 1];
			parts[by_offset->partition].push_back(j);
			continue;
		}
		/*
		 * The worker: pgoutput:<source>:<commit LSN>:<position> (StampNextChange),
		 * an entity-ordered target (stream-ordered ones claim nothing).
		 */
		const std::optional<std::string> &dk = reqs[j].delivery_key;
		if (!dk || dk->compare(0, 9, "pgoutput:") != 0 || !reqs[j].total_order)
			continue;
		const size_t colon = dk->rfind(':');
		if (colon == std::string::npos)
			continue;
		int64_t position = 0;
		const char *end = dk->data() + dk->size();
		const std::from_chars_result parsed = std::from_chars(dk->data() + colon + 1, end, position);
		if (parsed.ec != std::errc() || parsed.ptr != end || position != *reqs[j].total_order)
			continue;
		if (LoadTarget(reqs[j].target).mapping.stream_ordered)
			continue;
		offset[j] = position;
		const std::string_view partition(dk->data(), colon);
		if (last_members == nullptr || partition != last_partition) {
			last_members = &parts[std::string(partition)];
			last_partition = partition;
		}
		last_members->push_back(j);
	}
	for (auto &[partition, members] : parts) {
		if (!by_offset) {
			if (members.size() < kMinWorkerRangeClaim)
				continue; /* a small transaction: a ledger row per change costs less than four statements */
			bool increasing = true;
			for (size_t i = 1; i < members.size(); i++)
				increasing = increasing && offset[members[i]] > offset[members[i - 1]];
			if (!increasing)
				continue;
		}
		std::vector<Oid> targets(members.size());
		std::vector<int64_t> offsets(members.size());
		for (size_t i = 0; i < members.size(); i++) {
			targets[i] = reqs[members[i]].target;
			offsets[i] = offset[members[i]];
		}
		SetEventLabel(by_offset ? std::string("events of the batch (claiming their offsets)")
		                        : position_unit_ + "s " + std::to_string(positions[members.front()]) + " to " +
		                              std::to_string(positions[members.back()]) + " " + position_scope_ +
		                              " (claiming their positions)");
		SetContext(nullptr, "");
		std::vector<char> claimed = ClaimOffsetRanges(partition, targets, offsets, TransactionSeconds());
		for (size_t i = 0; i < members.size(); i++)
			claims_made_[members[i]] = claimed[i];
	}
	bool any = false;
	for (char c : claims_made_)
		any = any || c != kClaimByDigest;
	if (!any)
		claims_made_.clear();
}

Outcome
ApplyEngine::ApplyChangeWithClaimMade(const std::vector<ChangeRequest> &reqs, size_t i)
{
	if (!claims_made_.empty() && claims_made_[i] != kClaimByDigest)
		pending_claim_ = claims_made_[i] != 0;
	Outcome o = ApplyChange(reqs[i]);
	pending_claim_.reset();
	return o;
}

std::vector<Outcome>
ApplyEngine::ApplyChanges(const std::vector<ChangeRequest> &reqs, const std::vector<size_t> &positions)
{
	std::vector<Outcome> out(reqs.size(), Outcome::Ignored);
	for (size_t i = 0; i < reqs.size(); i++)
		if (reqs[i].op == Op::Truncate) {
			SetEventPosition(positions[i]);
			LockForTruncate(reqs[i].target);
		}
	/*
	 * A truncate is a table-level barrier: the changes between two truncates
	 * form a segment.  Consecutive truncates (one source TRUNCATE of several
	 * tables arrives as one change per table) empty their tables with one
	 * statement (TruncateTarget).
	 */
	size_t begin = 0;
	for (size_t i = 0; i <= reqs.size(); i++) {
		if (i < reqs.size() && reqs[i].op != Op::Truncate)
			continue;
		if (i > begin)
			ApplySegment(reqs, positions, begin, i, out);
		if (i < reqs.size()) {
			const bool first = i == 0 || reqs[i - 1].op != Op::Truncate;
			const bool last = i + 1 == reqs.size() || reqs[i + 1].op != Op::Truncate;
			grouping_truncates_ = !(first && last);
			SetEventPosition(positions[i]);
			out[i] = ApplyChangeWithClaimMade(reqs, i);
			if (last && grouping_truncates_) {
				/* errors of the statement name the run's first change */
				size_t j = i;
				while (j > 0 && reqs[j - 1].op == Op::Truncate)
					j--;
				SetEventPosition(positions[j]);
				SetContext(nullptr, "");
				FlushTruncates();
			}
		}
		begin = i + 1;
	}
	SetEventLabel("");
	return out;
}

void
ApplyEngine::TruncateTarget(const Target &t, const RunAs &as, bool restart_identity)
{
	if (grouping_truncates_) {
		pending_truncates_.push_back(PendingTruncate{t.own_rows, as, restart_identity});
		return;
	}
	Params none;
	Execute("TRUNCATE " + t.own_rows + (restart_identity ? " RESTART IDENTITY" : ""), none, as);
}

void
ApplyEngine::FlushTruncates()
{
	std::vector<PendingTruncate> pending;
	pending.swap(pending_truncates_);
	grouping_truncates_ = false;
	auto same = [](const RunAs &a, const RunAs &b) {
		return a.kind == b.kind && a.role == b.role && a.restricted == b.restricted;
	};
	std::vector<bool> done(pending.size(), false);
	for (size_t i = 0; i < pending.size(); i++) {
		if (done[i])
			continue;
		std::string tables;
		for (size_t j = i; j < pending.size(); j++)
			if (!done[j] && same(pending[j].as, pending[i].as) &&
			    pending[j].restart_identity == pending[i].restart_identity) {
				tables += (tables.empty() ? "" : ", ") + pending[j].table;
				done[j] = true;
			}
		Params none;
		Execute("TRUNCATE " + tables + (pending[i].restart_identity ? " RESTART IDENTITY" : ""), none, pending[i].as);
	}
}

} // namespace cdc::pg
