// The change-by-change path (SPEC §4): ApplyChange and ApplyEntity, in the
// caller's transaction.  Per change: dedup claim (ledger) -> entity lock ->
// Decide() (core/decision.hpp) -> entity record, target row, handler call
// or history row -> outbox row -> counts.  Also truncate barriers (TRUNCATE
// or the keep-newer delete, cdc.table_barrier), key-changing updates (the
// implied delete that moves unsent columns), conflicts (cdc.conflicts and
// the conflict policy) and dead letters of expired changes.  And the
// worker's questions about a target around its changes: the replica
// identity guard (KeyColumnOutsideIdentity, RequireRowAtKey) and, after a
// table's copy, the rows the copy did not refresh (KeysOlderThan,
// OtherSubscriptionWriting).
//
// Glue, C++ regime: every statement through SPI, PostgreSQL calls through
// PgCall.  Must not hold state across calls: everything lives in the
// ApplyEngine of the call (engine.hpp).
#include "core/errors.hpp"
#include "pg/apply/internal.hpp"
#include "pg/apply/target.hpp"
#include "pg/spi.hpp"
#include "core/envelope.hpp"
#include "pg/apply/engine.hpp"
#include "pg/apply/image.hpp"
#include "pg/apply/modes.hpp"
#include "pg/apply/outbox.hpp"
#include "pg/apply/state_store.hpp"
#include "pg/apply/table_write.hpp"
#include "pg/guc.hpp"

extern "C" {
#include "executor/spi.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
}

#include <algorithm>
#include <stdexcept>

namespace cdc::pg {

namespace {

struct EntityChange {
	const Target *t;
	const SourceInfo *source_info;
	bool is_snapshot;
	bool is_delete;
	const Image *key_img;   // image holding the key columns
	Image *image;           // after-image (upsert) or before-image (delete); its values are released once written
	// Images whose non-key values are still pending (ConvertImage with
	// keys_only): converted by Complete() once the change is to be written,
	// or when the decision needs the content hash; never for a change that
	// is not applied (docs/semantics.md).
	Image *pending[2] = {nullptr, nullptr};
	// The image the content hash covers while it is still to be computed
	// (content_hash empty); nullptr once computed, or for deletes ("0").
	const Image *hash_of = nullptr;
	std::string entity_key;   // JSON ({"id": "7"}): outbox, conflicts, history, handlers
	std::string compact_key;  // cdc.entity_state.key (core/layout.hpp)
	Version version;
	std::string source;     // source id for version comparison ("" for column versions)
	int32_t src = 0;        // its id in cdc.source
	int32_t now_s = 0;      // transaction start, seconds since 2000 (TransactionSeconds)
	bool claimed_before = false; // the ledger already had the delivery: only the version records can make it applied
	std::string content_hash;
	std::string delivery_key;
	char op;                // outbox op: 'c', 'u', 'd', 'r'
	// Stream ordering: the change is already decided by the target's stream
	// mark (applied); no claim, no entity record (docs/semantics.md).
	bool stream = false;
	// Deletes only: when set, the removed row's values of these columns are
	// read (as output-function text, NULL as nullopt) just before the row is
	// deleted, under the entity lock.  Used by key-changing updates to move
	// unsent columns to the new key (SPEC §4.4).
	const std::vector<int> *capture_cols = nullptr;
	std::optional<std::vector<std::optional<std::string>>> *captured = nullptr;
	RunAs as; // who the statements on the target run as (ApplyEngine::Authorize)
};

// Converts what the change still has pending and computes its content
// hash: before anything is written for it, or when the version decision
// compares content hashes (ContentHashDecides).  The column types' input
// errors (ConvertImage) are raised here: for an applied change, in the
// transaction that took its claim, so nothing of it stays.
void
Complete(EntityChange &c)
{
	for (Image *img : c.pending)
		if (img)
			CompleteImage(*c.t, *img, c.as);
	if (c.hash_of) {
		c.content_hash = ContentHash(*c.t, *c.hash_of);
		c.hash_of = nullptr;
	}
}

// Is `c` an upsert of a full image (every column the destination does not
// compute, none unavailable) into a state-mode table whose rows nothing
// else changes (independent_rows: no triggers, rules, row security, CHECK
// constraints or unique index besides the key's)?  Then the row the upsert
// leaves depends on the image alone, as for the batch's merged rows
// (segment.cpp, CollapseAllowed).
bool
FullStateUpsert(const EntityChange &c)
{
	const Target &t = *c.t;
	if (c.is_delete || c.image->has_unavailable || t.modes.mode != Mode::State || !t.independent_rows)
		return false;
	for (size_t i = 0; i < t.columns.size(); i++)
		if (!t.columns[i].generated && !c.image->cells[i].present)
			return false;
	return true;
}

// Is the row an upsert leaves exactly its image, so that the outbox payload
// can be built from the image's Datums (PayloadFromImage) instead of read
// back with RETURNING?  For a full state upsert (FullStateUpsert) into a
// table without generated columns (PayloadFromImageAllowed) or non-key
// GENERATED ALWAYS identity columns.
bool
PayloadIsImage(const EntityChange &c)
{
	const Target &t = *c.t;
	return FullStateUpsert(c) && !t.has_nonkey_identity_always && PayloadFromImageAllowed(t);
}

// Reads columns `cols` of the row with the key of `key_img` as text.
std::optional<std::vector<std::optional<std::string>>>
SelectColumnsText(const Target &t, const Image &key_img, const std::vector<int> &cols, const RunAs &as)
{
	Params p;
	std::string where = KeyPredicate(t, key_img, p);
	std::string list;
	for (size_t i = 0; i < cols.size(); i++)
		list += (i ? ", t." : "t.") + QuoteIdent(t.columns[size_t(cols[i])].name) + "::pg_catalog.text";
	uint64_t n = Execute("SELECT " + list + " FROM " + t.own_rows + " AS t WHERE " + where, p, as);
	if (n == 0)
		return std::nullopt;
	std::vector<std::optional<std::string>> out;
	for (size_t i = 0; i < cols.size(); i++)
		out.push_back(ResultText(0, int(i) + 1));
	return out;
}

// The entity's record, locked or (`lock` false) read unlocked: see
// LockEntityRecord.
std::optional<EntityRecord>
FindEntity(const EntityChange &c, EntityLocation *loc, bool lock)
{
	return LockEntityRecord(c.t->relid, c.compact_key, c.t->version_col >= 0 ? 3 : 4, {{c.source, c.src}}, loc, lock);
}

// Writes the entity record.  Returns false when a concurrent transaction
// created the record first, or changed it since it was read unlocked (the
// caller then locks it and decides again).
bool
WriteEntity(const EntityChange &c, bool existed, const EntityLocation &loc)
{
	return WriteEntityRecord(c.t->relid, c.compact_key, c.src, c.version, c.is_delete, c.content_hash, c.now_s, existed,
	                         loc);
}

// One term of MutateTarget's check that a GENERATED ALWAYS identity column
// already holds the change's value (parameter $param): "t.col = $param IS
// TRUE" with the column type's qualified equality (search_path-immune; an
// identity column is NOT NULL, so a NULL in the change fails the check as
// IS NOT DISTINCT FROM would).  `so_far`: the terms before it.
std::string
SameIdentity(const Column &col, const std::string &so_far, int param)
{
	return std::string(so_far.empty() ? "" : " AND ") + "(t." + QuoteIdent(col.name) + " " + col.eq_op + " $" +
	       std::to_string(param) + ") IS TRUE";
}

// The row as MutateTarget's statement returns it: a composite value
// (RowDatumSql, "t.*", not "t": a target column named t would be taken for
// the row; found by a fresh-user run: the payload was that column's value,
// or XX000 when it was NULL; sql/target_features.sql), converted to JSON
// after the statement (ResultRowsJsonb), under the payload settings and not
// while the statement and its triggers run.
std::string
RowExpression(const Target &t)
{
	return RowDatumSql("t", t.qualified);
}

// What MutateTarget's statement returns: the row (RowExpression) when
// `returning` (else NULL), then the identity check when there is one; empty
// when nothing is needed.
std::string
ReturningList(const Target &t, bool returning, const std::string &same_identity)
{
	if (!returning && same_identity.empty())
		return "";
	return (returning ? RowExpression(t) : std::string("NULL::pg_catalog.text")) +
	       (same_identity.empty() ? "" : ", " + same_identity);
}

// Should an update be written as an UPDATE of the columns it carries before
// the upsert?  In state mode, when its image lacks a column the destination
// does not compute (a destination-only column, one outside the column list):
// an INSERT … ON CONFLICT DO UPDATE evaluates that column's default even
// when the row exists, and a nextval() default (serial, identity) advanced
// its sequence on every update, where PostgreSQL's own apply updates the row
// and evaluates nothing (TAP 164, t_seq).  Only a key without a row is
// written by the upsert then.  Also when the target has triggers that the
// upsert fires and an UPDATE does not (BEFORE INSERT row triggers, INSERT
// statement triggers): PostgreSQL's own apply fires only UPDATE triggers
// for an update, and a BEFORE INSERT trigger that changed NEW changed the
// values the upsert's DO UPDATE wrote (TAP 166).
bool
UpdateBeforeUpsert(const EntityChange &c)
{
	const Target &t = *c.t;
	if (c.is_delete || c.op != 'u' || c.image->has_unavailable || t.modes.mode != Mode::State)
		return false;
	if (t.upsert_fires_insert_triggers)
		return true;
	for (size_t i = 0; i < t.columns.size(); i++)
		if (!t.columns[i].generated && !c.image->cells[i].present)
			return true;
	return false;
}

// Does the key of change `c` have a row?  Locks it (FOR UPDATE) when it
// has, waiting for a transaction that writes it.  Two callers:
// - A delete (MutateTarget) locks first, by a statement of its own, as the
//   batch's delete statement does (segment.cpp, WriteRows), so that the
//   DELETE, with the next statement's snapshot, finds the key's row as that
//   transaction left it.  A DELETE alone, in READ COMMITTED, follows only
//   the row version it saw: when the other transaction deleted the row and
//   inserted the key again, it removed nothing, and the new row stayed
//   under the delete's tombstone (found by review on the statement path,
//   cdc.direct_writes off; the direct path looks the key up again,
//   table_write.cpp).
// - An update that UpdateBeforeUpsert writes as an UPDATE: the row is still
//   there for it.  The UPDATE's own count cannot tell: a BEFORE UPDATE
//   trigger that returns NULL leaves it 0 for a row that exists, and the
//   upsert run then fired that trigger a second time, fired the BEFORE
//   INSERT ones and evaluated the defaults of the columns the event lacks
//   (regress update_suppressed).  A key without a row (none, or one the
//   caller's row security hides) is the upsert's, whose conflict check also
//   catches a row inserted meanwhile.
bool
LockKeyRow(const EntityChange &c)
{
	const Target &t = *c.t;
	Params p;
	std::string where = KeyPredicate(t, *c.key_img, p);
	return Execute("SELECT 1 FROM " + t.own_rows + " AS t WHERE " + where + " FOR UPDATE", p, c.as) > 0;
}

// Mutates the target table; returns the resulting row (upsert) or the removed
// row (delete) as JSON text, if any, when `returning` (outbox payloads and
// handlers need it; a row as large as the event is not made otherwise).
// With `jsonb` (and `returning`), the row is stored there as jsonb instead,
// and the text returned is empty: an outbox payload needs no text.  With
// `found`, an image with unavailable values (an UPDATE of the columns sent)
// also says whether the key had a row.  `columns_sent`: write the image
// that way although it has no unavailable values (UpdateBeforeUpsert), as
// an UPDATE of the columns it carries, instead of the upsert.
std::optional<std::string>
MutateTarget(const EntityChange &c, bool returning, std::optional<Datum> *jsonb = nullptr, bool *found = nullptr,
             bool columns_sent = false)
{
	const bool as_jsonb = returning && jsonb != nullptr;
	const Target &t = *c.t;
	if (!c.is_delete)
		c.image->RequireComplete();
	Params p;
	std::string sql;
	/* non-key GENERATED ALWAYS identity columns: "the stored value is the change's", as a boolean expression */
	std::string same_identity;
	bool nothing_to_set = false;
	if (c.is_delete) {
		LockKeyRow(c);
		std::string where = KeyPredicate(t, *c.key_img, p);
		sql = "DELETE FROM " + t.own_rows + " AS t WHERE " + where + (returning ? " RETURNING " + RowExpression(t) : "");
	} else if (c.image->has_unavailable || columns_sent) {
		/* The row exists (Decide checked; or LockKeyRow found it): set only the columns the source sent. */
		std::string set;
		for (size_t i = 0; i < t.columns.size(); i++) {
			const Cell &cell = c.image->cells[i];
			if (!cell.present || cell.unavailable)
				continue;
			if (t.columns[i].typlen == -1)
				p.AddVarlena(t.columns[i].type, cell.value, cell.isnull);
			else
				p.Add(t.columns[i].type, cell.value, cell.isnull);
			if (t.columns[i].identity_always) {
				/* never assigned (PostgreSQL refuses it): the stored value must be the change's */
				same_identity += SameIdentity(t.columns[i], same_identity, p.Count());
				continue;
			}
			if (!set.empty())
				set += ", ";
			set += QuoteIdent(t.columns[i].name) + " = $" + std::to_string(p.Count());
		}
		std::string where = KeyPredicate(t, *c.key_img, p);
		const std::string list = ReturningList(t, returning, same_identity);
		if (set.empty()) { /* only the key and unchanged columns: the row stays as it is */
			if (list.empty() && !found)
				return std::nullopt;
			sql = "SELECT " + (list.empty() ? std::string("NULL::pg_catalog.text") : list) + " FROM " + t.own_rows + " AS t WHERE " + where;
		} else {
			sql = "UPDATE " + t.own_rows + " AS t SET " + set + " WHERE " + where + (list.empty() ? "" : " RETURNING " + list);
		}
	} else {
		std::string cols, vals, set, conflict;
		for (size_t i = 0; i < t.columns.size(); i++) {
			const Cell &cell = c.image->cells[i];
			if (!cell.present)
				continue;
			if (t.columns[i].typlen == -1)
				p.AddVarlena(t.columns[i].type, cell.value, cell.isnull);
			else
				p.Add(t.columns[i].type, cell.value, cell.isnull);
			std::string q = QuoteIdent(t.columns[i].name);
			if (!cols.empty()) {
				cols += ", ";
				vals += ", ";
			}
			cols += q;
			vals += "$" + std::to_string(p.Count());
			if (t.columns[i].identity_always) {
				/*
				 * A GENERATED ALWAYS identity column takes the change's value
				 * on insert (OVERRIDING SYSTEM VALUE) and is never assigned on
				 * update, where PostgreSQL allows only DEFAULT: a key column
				 * equals the conflicting row's; any other must already hold
				 * the change's value.
				 */
				if (std::find(t.key.begin(), t.key.end(), int(i)) == t.key.end())
					same_identity += SameIdentity(t.columns[i], same_identity, p.Count());
				continue;
			}
			set += (set.empty() ? "" : ", ") + q + " = EXCLUDED." + q;
		}
		for (size_t i = 0; i < t.key.size(); i++) {
			if (i)
				conflict += ", ";
			conflict += QuoteIdent(t.columns[size_t(t.key[i])].name);
		}
		const std::string list = ReturningList(t, returning, same_identity);
		sql = "INSERT INTO " + t.qualified + " AS t (" + cols + ")" + (t.has_identity_always ? " OVERRIDING SYSTEM VALUE" : "") +
		      " VALUES (" + vals + ") ON CONFLICT (" + conflict + ") DO " +
		      (set.empty() ? std::string("NOTHING") : "UPDATE SET " + set) + (list.empty() ? "" : " RETURNING " + list);
		nothing_to_set = set.empty();
	}
	uint64_t n = Execute(sql, p, c.as);
	if (found)
		*found = n > 0;
	if (n == 0 && nothing_to_set && returning) { /* DO NOTHING: the row is there and has nothing the change could set */
		std::optional<std::string> row = SelectRowImage(t, *c.key_img, c.as);
		if (as_jsonb && row) {
			*jsonb = JsonbFromText(*row);
			row = std::string();
		}
		return row;
	}
	if (n == 0)
		return std::nullopt;
	if (!same_identity.empty() && ResultText(0, 2) != std::optional<std::string>("t")) {
		std::string names;
		for (const Column &col : t.columns)
			if (col.identity_always && std::find(t.key.begin(), t.key.end(), int(&col - t.columns.data())) == t.key.end())
				names += (names.empty() ? "\"" : ", \"") + col.name + "\"";
		Fail("428C9", "column " + names + " of table " + t.qualified +
		                  " is GENERATED ALWAYS AS IDENTITY: the change would give the existing row another value, which "
		                  "PostgreSQL allows no UPDATE to write",
		     "Entity key " + c.entity_key + ".",
		     "Make the column GENERATED BY DEFAULT AS IDENTITY (ALTER TABLE ... ALTER COLUMN ... SET GENERATED BY DEFAULT) "
		     "to take the source's values.");
	}
	if (!returning)
		return std::nullopt;
	if (as_jsonb) {
		std::optional<Datum> j = ResultRowsJsonb(1, 1, c.as)[0];
		if (!j)
			throw std::runtime_error("the row image read back is NULL");
		*jsonb = *j;
		return std::string();
	}
	return ResultRowsJsonText(1, 1, c.as)[0];
}

void
RecordConflict(const EntityChange &c, const Decision &d, const std::optional<EntityRecord> &stored)
{
	std::optional<std::string> stored_image = SelectRowImage(*c.t, *c.key_img, c.as);
	Params p;
	p.AddOid(c.t->relid);
	p.AddText(c.entity_key);
	p.AddText(c.delivery_key);
	p.AddText(d.reason);
	p.AddTextOrNull(stored ? std::optional<std::string>(stored->version.ToArrayLiteral()) : std::nullopt);
	p.AddText(c.version.ToArrayLiteral());
	p.AddTextOrNull(stored_image);
	p.AddText(c.image->raw->Json());
	p.AddText(std::string(1, c.op));
	Execute("INSERT INTO cdc.conflicts (target, entity_key, delivery_key, reason, stored_version, event_version, "
	        "stored_image, event_image, op) "
	        "VALUES ($1, $2::pg_catalog.jsonb, $3, $4, $5::pg_catalog.int8[], $6::pg_catalog.int8[], "
	        "$7::pg_catalog.jsonb, $8::pg_catalog.jsonb, $9)",
	        p, true);
	if (c.t->mapping.conflict_error)
		Fail("23000", "conflicting change for key " + c.entity_key + " of table " + c.t->qualified + ": " + d.reason, {},
		     "The mapping's conflict_policy is 'error'; use 'record' to record conflicts in cdc.conflicts instead.");
}

/* ---- mode hooks (pg/modes.hpp) ---- */

ChangeIdentity
IdentityOf(const EntityChange &c)
{
	ChangeIdentity id;
	id.op = c.op;
	id.is_snapshot = c.is_snapshot;
	id.entity_key = c.entity_key;
	id.version = c.version;
	id.delivery_key = c.delivery_key;
	id.source_json = SourceJson(*c.source_info, c.version);
	id.source_ts_ms = c.source_info->ts_ms;
	return id;
}

// History mode: one history row per change; a replay finds its
// (cdc_key, cdc_version) taken.  No entity record: the history table's unique
// index is the replay guard.
Outcome
ApplyHistory(EntityChange &c, Counters &cnt)
{
	const Target &t = *c.t;
	Complete(c); /* every change is a history row: nothing decides it before the values are written */
	if (c.claimed_before && DeliveryHadConflict(t.relid, c.delivery_key)) {
		cnt.duplicate++;
		return Outcome::Duplicate;
	}
	std::vector<ModeValue> values;
	for (size_t i = 0; i < t.columns.size(); i++) {
		const Cell &cell = c.image->cells[i];
		if (!cell.present)
			continue;
		if (IsHistoryMetaColumn(t.columns[i].name))
			Fail("42703", "field " + cdc::QuotedField(std::string(c.is_delete ? "before." : "after.") + t.columns[i].name) +
			                  " collides with a metadata column of history table " + t.qualified,
			     {}, "Columns named cdc_* of a history table are written by cdc_apply only.");
		ModeValue v;
		v.column = t.columns[i].name;
		v.type = t.columns[i].type;
		v.value = cell.value;
		v.isnull = cell.isnull;
		v.unavailable = cell.unavailable;
		values.push_back(std::move(v));
	}
	std::optional<std::string> row;
	switch (AppendHistory(t.modes, t.qualified, t.own_rows, values, IdentityOf(c), &row, c.as)) {
	case HistoryResult::Exists:
		cnt.duplicate++;
		return Outcome::Duplicate;
	case HistoryResult::NoEarlierRow: {
		if (c.claimed_before) {
			cnt.duplicate++;
			return Outcome::Duplicate;
		}
		Decision d;
		d.outcome = Outcome::Conflict;
		d.reason = "the event has unavailable (unchanged TOAST) values and the history has no earlier row of the key";
		RecordConflict(c, d, std::nullopt);
		cnt.conflict++;
		return Outcome::Conflict;
	}
	case HistoryResult::Appended:
		break;
	}
	cnt.applied++;
	if (c.is_snapshot)
		cnt.snapshot_rows++;
	else if (t.mapping.outbox && WriteOutbox(t, *c.source_info, c.op, c.version, c.entity_key, row))
		cnt.outbox_rows++;
	return Outcome::Applied;
}

std::string QuoteLiteralText(const std::string &s);

// History mode, truncate: one history row with op t and key {} (no data
// columns); a replay finds it taken.
Outcome
ApplyHistoryTruncate(const Target &t, const ChangeRequest &req, const std::string &dk, Counters &cnt, const RunAs &as)
{
	ChangeIdentity id;
	id.op = 't';
	id.entity_key = "{}";
	id.version = req.version;
	id.delivery_key = dk;
	id.source_json = SourceJson(req.source, req.version);
	id.source_ts_ms = req.source.ts_ms;
	std::optional<std::string> row;
	if (AppendHistory(t.modes, t.qualified, t.own_rows, {}, id, &row, as) == HistoryResult::Exists) {
		cnt.duplicate++;
		return Outcome::Duplicate;
	}
	cnt.applied++;
	if (t.mapping.outbox && WriteOutbox(t, req.source, 't', req.version, "", std::nullopt))
		cnt.outbox_rows++;
	return Outcome::Applied;
}

// Handler mode, truncate: the rows go one by one (DELETE ... RETURNING) and
// the handler sees each removed row as op t with old = the row, so derived
// aggregates stay exact.  `keep`: jsonb[] literal of the entity keys that
// survive (their entity moved past the truncate), as compact keys.
void
TruncateWithHandler(const Target &t, const std::string &keep, const ChangeRequest &req, const std::string &dk,
                    const RunAs &as)
{
	/* the entity key as EntityKey spells it: the key texts of KeyTextPg */
	std::string key = "pg_catalog.jsonb_build_object(";
	for (size_t i = 0; i < t.key.size(); i++) {
		const std::string &name = t.columns[size_t(t.key[i])].name;
		key += (i ? ", " : "") + QuoteLiteralText(name) + "::pg_catalog.text, " + KeyTextSql(t, t.key[i]);
	}
	key += ")";
	Params del;
	del.AddText(keep);
	uint64_t n = Execute("DELETE FROM " + t.own_rows + " AS t WHERE " + CompactKeySql(t) +
	                         " OPERATOR(pg_catalog.<>) ALL ($1::pg_catalog.text[]) " +
	                         "RETURNING " + RowDatumSql("t", t.qualified) + ", " + key + "::pg_catalog.text",
	                     del, as);
	std::vector<std::pair<std::string, std::string>> removed; /* (row, entity key): SPI results are overwritten by the calls */
	std::vector<std::optional<std::string>> rows = ResultRowsJsonText(n, 1, as);
	for (uint64_t i = 0; i < n; i++)
		removed.emplace_back(rows[i].value_or("null"), ResultText(i, 2).value_or("{}"));
	ChangeIdentity id;
	id.op = 't';
	id.version = req.version;
	id.delivery_key = dk;
	id.source_json = SourceJson(req.source, req.version);
	id.source_ts_ms = req.source.ts_ms;
	for (const auto &[row, entity_key] : removed) {
		id.entity_key = entity_key;
		CallHandler(t.modes, t.display, t.qualified, id, row, std::nullopt, as);
	}
}

// May the applied upsert `c` be written as PostgreSQL's own apply worker
// writes a row (UpsertRowsDirect, table_write.hpp) instead of MutateTarget's
// INSERT ... ON CONFLICT DO UPDATE, with the same result?  A full state
// upsert (FullStateUpsert: no default is evaluated, nothing else changes
// the row), no GENERATED ALWAYS identity column (the statement's OVERRIDING
// SYSTEM VALUE and its identity check), and some column besides the key
// (else the statement leaves the row as it is).  Two appliers of one key
// do not race here (both take the entity's record first); a writer outside
// the engine that inserts the key meanwhile makes the insert an update, as
// the statement's conflict does (UpsertRowsDirect).
bool
DirectUpsertAllowed(const EntityChange &c)
{
	const Target &t = *c.t;
	if (!cdc_direct_writes || !FullStateUpsert(c) || t.has_identity_always)
		return false;
	for (size_t i = 0; i < t.columns.size(); i++)
		if (!t.columns[i].generated && std::find(t.key.begin(), t.key.end(), int(i)) == t.key.end())
			return true;
	return false;
}

// The applied change's writes: the target row (with the handler call of
// handler mode), then the outbox row; counts it.  Stream ordering only: an
// update with unavailable values that finds no row is recorded as a
// conflict instead (entity ordering decided that before, Decide rule 6).
Outcome
ApplyDecided(EntityChange &c, Counters &cnt)
{
	const Target &t = *c.t;
	Complete(c);
	/*
	 * An upsert's image as received is not needed once it is converted and
	 * decided (its JSON serves conflicts, dead letters, and the payload of a
	 * delete or of a partial image that finds no row): its texts go before
	 * the statements run.
	 */
	if (!c.is_delete && !c.image->has_unavailable && c.image->raw)
		TrimFreedMemory(c.image->raw->Release());
	if (c.is_delete && c.capture_cols && c.captured)
		*c.captured = SelectColumnsText(t, *c.key_img, *c.capture_cols, c.as);
	const bool handler = t.modes.mode == Mode::Handler;
	std::optional<std::string> old_row;
	if (handler && !c.is_delete)
		old_row = SelectRowImage(t, *c.key_img, c.as);
	const bool outbox_row = t.mapping.outbox && !c.is_snapshot;
	/* stream ordering: whether a partial update found its row */
	const bool partial_stream = c.stream && !c.is_delete && c.image->has_unavailable;
	/* the payload is the image itself: built from its Datums after the write, no row read back */
	const bool payload_from_image = outbox_row && !handler && !partial_stream && PayloadIsImage(c);
	/* only the outbox needs the row: as jsonb, no text in between */
	std::optional<Datum> jrow;
	std::optional<std::string> row;
	bool direct = false;
	if (c.is_delete && !handler) {
		/*
		 * As PostgreSQL's own apply and the batch's segments delete
		 * (FindRowsDirect): the row found by the key index and locked, then
		 * removed; the outbox gets it as RETURNING to_jsonb(t) would.
		 */
		std::vector<std::optional<Datum>> removed;
		direct = FindRowsDirect(t, {c.key_img}, /* remove */ true, outbox_row ? &removed : nullptr, c.as);
		if (direct && outbox_row && removed[0]) {
			jrow = removed[0];
			row = std::string(); /* found, as MutateTarget marks a jsonb result */
		}
	} else if (!c.is_delete) {
		/* an outbox row needs the payload from the image: the direct write reads nothing back */
		direct = !handler && !partial_stream && (!outbox_row || payload_from_image) && DirectUpsertAllowed(c) &&
		         UpsertRowsDirect(t, {c.image}, c.as);
	}
	if (!direct) {
		const bool want_row = !payload_from_image && (handler || outbox_row || partial_stream);
		bool found = false;
		if (UpdateBeforeUpsert(c) && (found = LockKeyRow(c))) {
			/* the same change as an UPDATE of the columns it carries (the path of unavailable values) */
			row = MutateTarget(c, want_row, handler ? nullptr : &jrow, nullptr, true);
		}
		if (!found)
			row = MutateTarget(c, want_row, handler ? nullptr : &jrow);
	}
	/* a table outbox's stored form where it can be printed from the image (outbox.hpp), else the jsonb */
	bool payload_stored = false;
	if (payload_from_image) {
		if (std::optional<Datum> stored = StoredPayloadFromImage(t, *c.image)) {
			jrow = stored;
			payload_stored = true;
		} else {
			jrow = PayloadFromImage(t, *c.image, c.as);
		}
	}
	if (!c.is_delete && !handler)
		TrimFreedMemory(ReleaseValues(t, *c.image)); /* written (and in the payload): an event-sized value is not held on */
	if (partial_stream && !row) {
		Decision d;
		d.outcome = Outcome::Conflict;
		d.reason = "the event has unavailable (unchanged TOAST) values for a row the destination does not have";
		RecordConflict(c, d, std::nullopt);
		cnt.conflict++;
		return Outcome::Conflict;
	}
	if (handler) /* a delete's RETURNING row is the removed (old) row */
		CallHandler(t.modes, t.display, t.qualified, IdentityOf(c), c.is_delete ? row : old_row, c.is_delete ? std::nullopt : row,
		            c.as);
	if (c.is_delete && !row && outbox_row)
		row = c.image->raw->Json(); /* the destination never had the row: publish the before-image */
	cnt.applied++;
	if (c.is_snapshot)
		cnt.snapshot_rows++;
	else if (t.mapping.outbox && (jrow ? WriteOutboxJsonb(t, *c.source_info, c.op, c.version, c.entity_key, jrow,
	                                                      payload_stored, c.key_img)
	                                   : WriteOutbox(t, *c.source_info, c.op, c.version, c.entity_key, row)))
		cnt.outbox_rows++;
	return Outcome::Applied;
}

Outcome
ApplyEntity(EntityChange &c, Counters &cnt)
{
	const Target &t = *c.t;
	if (t.modes.mode == Mode::History)
		return ApplyHistory(c, cnt);
	if (c.stream)
		return ApplyDecided(c, cnt);
	const Image *hashed = c.hash_of; /* kept for AdoptReleaseHash: Complete() clears hash_of */
	for (int attempt = 0;; attempt++) {
		/*
		 * First read unlocked: the record's write below takes it before the
		 * row is written, and a record changed meanwhile is decided again,
		 * locked (docs/internals.md, "Entity records without a row lock").
		 */
		EntityLocation loc;
		std::optional<EntityRecord> stored = FindEntity(c, &loc, /* lock */ attempt > 0);
		DecisionInput in;
		in.version = c.version;
		in.source = c.source;
		in.is_delete = c.is_delete;
		in.has_unavailable = !c.is_delete && c.image->has_unavailable;
		in.stored = stored;
		if (t.barrier && t.barrier->source == c.source)
			in.barrier = t.barrier->version;
		if (!stored) { /* records may have been pruned: the watermark tells what can be proven */
			in.watermark = ReadWatermark(t.relid, c.src, t.version_col >= 0 ? 3 : 4);
			auto mark = t.stream_marks.find(c.src);
			if (mark != t.stream_marks.end())
				in.stream_mark = mark->second;
		}
		if (in.has_unavailable)
			in.row_exists = SelectRowImage(t, *c.key_img, c.as).has_value();
		/*
		 * The content hash only where it decides something.  A delivery the
		 * ledger had is a duplicate unless the decision is "applied", which
		 * no content hash makes: its hash is not needed either.
		 */
		if (c.hash_of && !c.claimed_before && ContentHashDecides(in))
			Complete(c);
		in.content_hash = c.content_hash;
		/* an equal version: the record may be release 0.1.0's, hashed from the session's texts */
		if (hashed && !c.hash_of && stored && Version::Compare(c.version, stored->version) == 0)
			in.content_hash = AdoptReleaseHash(t, *hashed, c.content_hash, stored->content_hash);
		Decision d = Decide(in);
		if (c.claimed_before &&
		    (d.outcome != Outcome::Applied || DeliveryHadConflict(t.relid, c.delivery_key))) {
			/*
			 * The ledger had it and the records agree (or it was a recorded
			 * conflict that a re-decision must not turn into an apply): a
			 * duplicate delivery.
			 */
			cnt.duplicate++;
			return Outcome::Duplicate;
		}

		switch (d.outcome) {
		case Outcome::Stale:
			cnt.stale++;
			if (d.blocked_resurrection)
				cnt.blocked_resurrections++;
			return d.outcome;
		case Outcome::Duplicate:
			cnt.duplicate++;
			return d.outcome;
		case Outcome::Conflict:
			RecordConflict(c, d, stored);
			cnt.conflict++;
			return d.outcome;
		case Outcome::Ignored:
			cnt.ignored++;
			return d.outcome;
		case Outcome::Expired:
			/* cannot be proven new or old (docs/retention.md): the mapping's expired_policy decides */
			cnt.expired++;
			if (t.modes.expired_policy == ModeConfig::ExpiredPolicy::DeadLetter)
				RecordDeadLetter(t.relid, c.entity_key, c.delivery_key, c.op, c.version, *in.watermark, c.image->raw->Json(),
				                 SourceJson(*c.source_info, c.version));
			if (t.modes.expired_policy != ModeConfig::ExpiredPolicy::Apply)
				return d.outcome;
			break;
		case Outcome::Applied:
			break;
		}
		Complete(c); /* applied: its values are converted (their errors refuse it) and hashed */
		if (!WriteEntity(c, stored.has_value(), loc)) {
			if (attempt >= 3)
				throw std::runtime_error("entity record for " + c.entity_key + " keeps changing concurrently");
			continue; /* created or changed concurrently: lock it and decide again */
		}
		return ApplyDecided(c, cnt);
	}
}

std::string
QuoteLiteralText(const std::string &s)
{
	const char *q = PgCall([&]() { return quote_literal_cstr(s.c_str()); });
	return std::string(q);
}

// The dedup claim (SPEC §4.1) in the compact ledger (pg/state_store.hpp).
bool
Claim(const std::string &delivery_key, Oid relid, int32_t now_s)
{
	return ClaimDelivery(relid, delivery_key, now_s);
}

} // namespace

bool
ApplyEngine::TakeClaim(const std::string &delivery_key, Oid relid, int32_t now_s)
{
	if (pending_claim_) {
		bool claimed = *pending_claim_;
		pending_claim_.reset();
		return claimed;
	}
	return Claim(delivery_key, relid, now_s);
}

std::optional<std::string>
ApplyEngine::KeyColumnOutsideIdentity(Oid relid, const std::vector<std::string> &identity_columns)
{
	const Target &t = LoadTarget(relid);
	if (t.modes.mode != Mode::State)
		return std::nullopt;
	for (int k : t.key) {
		const std::string &name = t.columns[size_t(k)].name;
		if (std::find(identity_columns.begin(), identity_columns.end(), name) == identity_columns.end())
			return name;
	}
	return std::nullopt;
}

void
ApplyEngine::RequireRowAtKey(Oid relid, const RawImage &after, const std::string &column)
{
	const Target &t = LoadTarget(relid);
	const RunAs &as = Authorize(t);
	Image img = ConvertImage(t, after, "after", as, true);
	if (SelectRowImage(t, img, as))
		return;
	Fail("55000",
	     "update of table " + t.qualified + " cannot be applied: the source's replica identity does not carry key column \"" +
	         column + "\" of the destination, and the destination has no row with the new image's key, so the update may "
	                  "have changed the key",
	     "Applied as an insert it would leave the row under its old key behind.",
	     "Give the source table a replica identity that carries the destination key (REPLICA IDENTITY FULL, or the same "
	     "key), or key the destination by the replica identity's columns (cdc.register_mapping(..., key_columns => ...)); "
	     "then let the worker retry, or repair the row and skip the transaction (cdc.skip_transaction).");
}

bool
ApplyEngine::HasRowAtKey(Oid relid, const RawImage &img, const char *which)
{
	const Target &t = LoadTarget(relid);
	const RunAs &as = Authorize(t);
	Image key = ConvertImage(t, img, which, as, true);
	return SelectRowImage(t, key, as).has_value();
}

std::optional<std::string>
ApplyEngine::StateKeyText(Oid relid, const RawImage &img, const char *which)
{
	const Target &t = LoadTarget(relid);
	if (t.modes.mode != Mode::State)
		return std::nullopt;
	const RunAs &as = Authorize(t);
	Image key = ConvertImage(t, img, which, as, true);
	return CompactKey(t, key);
}

bool
ApplyEngine::SameKeyTexts(Oid relid, const RawImage &a, const RawImage &b)
{
	const Target &t = LoadTarget(relid);
	if (t.modes.mode != Mode::State)
		return false;
	size_t equal = 0;
	for (size_t i = 0; i < a.values.size(); i++) {
		const auto &[name, va] = a.values[i];
		const int ci = t.ColumnOf(name, i);
		if (ci < 0 || std::find(t.key.begin(), t.key.end(), ci) == t.key.end())
			continue;
		/* both images come from one relation message: the same column is usually at the same place */
		const cdc::DecodedValue *vb = nullptr;
		if (i < b.values.size() && b.values[i].first == name)
			vb = &b.values[i].second;
		for (size_t j = 0; vb == nullptr && j < b.values.size(); j++)
			if (b.values[j].first == name)
				vb = &b.values[j].second;
		if (vb == nullptr || va.kind != cdc::DecodedValue::Kind::Text || vb->kind != cdc::DecodedValue::Kind::Text ||
		    va.text != vb->text)
			return false;
		equal++;
	}
	return equal == t.key.size();
}

namespace {

// The expression ImageDigest and RowDigestAtKey both compute: the md5 of
// the output texts, as one text[]'s text, of the columns `img` carries,
// except generated ones, in column order.  With `p`, the values are
// `img`'s own, passed as parameters; without, the stored row's (`t.`
// columns of the statement's FROM).  nullopt: `img` has an unavailable
// value (with `p` only).
std::optional<std::string>
DigestExpression(const Target &t, const Image &img, Params *p)
{
	std::string texts;
	for (size_t i = 0; i < t.columns.size(); i++) {
		const Column &col = t.columns[i];
		const Cell &cell = img.cells[i];
		if (!cell.present || col.generated)
			continue;
		if (p && cell.unavailable)
			return std::nullopt;
		if (!texts.empty())
			texts += ", ";
		if (!p) {
			texts += "t." + QuoteIdent(col.name) + "::pg_catalog.text";
		} else if (cell.isnull) {
			texts += "NULL::pg_catalog.text";
		} else {
			p->Add(col.type, cell.value, false);
			texts += "$" + std::to_string(p->Count()) + "::pg_catalog.text";
		}
	}
	return "pg_catalog.md5(ARRAY[" + texts + "]::pg_catalog.text[]::pg_catalog.text)";
}

} // namespace

std::optional<std::string>
ApplyEngine::ImageDigest(Oid relid, const RawImage &raw, const char *which)
{
	const Target &t = LoadTarget(relid);
	const RunAs &as = Authorize(t);
	Image img = ConvertImage(t, raw, which, as, false);
	Params p;
	std::optional<std::string> digest = DigestExpression(t, img, &p);
	if (!digest)
		return std::nullopt;
	Execute("SELECT " + *digest, p, as);
	return ResultText(0, 1);
}

std::optional<std::string>
ApplyEngine::RowDigestAtKey(Oid relid, const RawImage &raw, const char *which)
{
	const Target &t = LoadTarget(relid);
	const RunAs &as = Authorize(t);
	Image img = ConvertImage(t, raw, which, as, true);
	Params p;
	std::string where = KeyPredicate(t, img, p);
	if (Execute("SELECT " + *DigestExpression(t, img, nullptr) + " FROM " + t.own_rows + " AS t WHERE " + where, p, as) ==
	    0)
		return std::nullopt;
	return ResultText(0, 1);
}

std::optional<std::string>
ApplyEngine::OtherSubscriptionWriting(Oid relid, const std::string &subscription, const std::string &system_id)
{
	Params p;
	p.AddOid(relid);
	p.AddText(subscription);
	p.AddText(system_id);
	/* a published table's target as the worker resolves it (ResolveUncached): its mapping, else the same name */
	uint64_t n = Execute(
		"SELECT s.name FROM cdc.subscription s JOIN cdc.subscription_rel r "
		"ON r.subid OPERATOR(pg_catalog.=) s.subid "
		"WHERE s.name OPERATOR(pg_catalog.<>) $2 "
		"AND (s.slot_system_id IS NULL OR s.slot_system_id OPERATOR(pg_catalog.=) $3) AND COALESCE("
		"(SELECT m.target::pg_catalog.oid FROM cdc.mapping m "
		"WHERE m.source_schema OPERATOR(pg_catalog.=) r.schema_name AND m.source_table OPERATOR(pg_catalog.=) r.table_name "
		"AND (m.source_name IS NULL OR m.source_name OPERATOR(pg_catalog.=) s.name) ORDER BY m.source_name IS NULL LIMIT 1), "
		"pg_catalog.to_regclass(pg_catalog.quote_ident(r.schema_name) OPERATOR(pg_catalog.||) '.' "
		"OPERATOR(pg_catalog.||) pg_catalog.quote_ident(r.table_name))::pg_catalog.oid) OPERATOR(pg_catalog.=) $1 "
		"ORDER BY s.name LIMIT 1",
		p, true);
	if (n == 0)
		return std::nullopt;
	return ResultText(0, 1);
}

std::vector<std::vector<std::string>>
ApplyEngine::KeysOlderThan(Oid relid, const std::string &source_name, const Version &v, std::vector<std::string> *key_names)
{
	const Target &t = LoadTarget(relid);
	key_names->clear();
	for (int k : t.key)
		key_names->push_back(t.columns[size_t(k)].name);
	if (t.mapping.stream_ordered)
		return {};
	return LiveKeysOlderThan(relid, SourceId(source_name, source_ids_), t.key.size(), v);
}

Outcome
ApplyEngine::ApplyChange(const ChangeRequest &req)
{
	NoteApplyProgress(); /* the worker's source keepalive, rate-limited (engine.hpp) */
	Oid relid = req.target;
	Target &t = LoadTarget(relid);
	SetContextKey(&t, req.delivery_key);
	const RunAs &as = Authorize(t);
	CheckSource(t, req);
	Counters &cnt = counters_[relid];
	bool column_version = t.version_col >= 0;
	std::string source = column_version ? std::string() : req.source.name;
	/*
	 * Stream ordering (docs/semantics.md, "Stream ordering"): the target's
	 * mark of this source decides, no claim and no entity record.  A change
	 * a segment already decided (and moved the mark past) comes with
	 * pending_stream_apply_.
	 */
	const bool stream = t.mapping.stream_ordered;
	if (stream)
		RequireStreamIntake(t);
	auto stream_new = [&](const Version &v, bool is_snapshot) {
		StreamMark &m = Mark(t, source);
		if (pending_stream_apply_) {
			pending_stream_apply_ = false;
			return true;
		}
		return !StreamProcessed(v, is_snapshot, m.running);
	};
	auto stream_advance = [&](const Version &v) {
		StreamMark &m = Mark(t, source);
		if (m.running < v)
			m.running = v;
		m.dirty = true;
	};

	if (req.op == Op::Truncate) {
		LockForTruncate(relid);
		if (t.mapping.truncate_ignore) {
			cnt.ignored++;
			return Outcome::Ignored;
		}
		if (column_version)
			Fail("0A000", "truncate events cannot be ordered for table " + t.qualified +
			                  ": its mapping orders changes by version_column",
			     {}, "Register the mapping with truncate_policy => 'ignore'.");
		const Version &v = req.version;
		std::string dk = req.delivery_key ? *req.delivery_key : DeriveDeliveryKey(req.source, req.op, req.total_order, "");
		SetContext(&t, dk);
		if (stream) {
			/* in stream order nothing older can come after it: a plain truncate, no barrier */
			if (!stream_new(v, false)) {
				cnt.duplicate++;
				return Outcome::Duplicate;
			}
			stream_advance(v);
			if (t.modes.mode == Mode::History)
				return ApplyHistoryTruncate(t, req, dk, cnt, as);
			if (t.modes.mode == Mode::Handler) {
				TruncateWithHandler(t, "{}", req, dk, as);
			} else {
				TruncateTarget(t, as, req.restart_identity);
			}
			cnt.applied++;
			if (t.mapping.outbox && WriteOutbox(t, req.source, 't', v, "", std::nullopt))
				cnt.outbox_rows++;
			return Outcome::Applied;
		}
		const bool claimed = TakeClaim(dk, relid, TransactionSeconds());
		if (t.modes.mode == Mode::History)
			return ApplyHistoryTruncate(t, req, dk, cnt, as);
		if (t.barrier && t.barrier->source == source && Version::Compare(v, t.barrier->version) <= 0) {
			/* a processed delivery (claim taken) or an older truncate */
			if (!claimed) {
				cnt.duplicate++;
				return Outcome::Duplicate;
			}
			cnt.stale++;
			return Outcome::Stale;
		}
		const int32_t src = SourceId(source, source_ids_);
		/*
		 * Rows whose entity moved past the truncate's version (a newer change
		 * applied before this late truncate arrived) survive it; everything
		 * else goes.  Usually there are none and TRUNCATE does the job.
		 */
		std::string keep = LiveKeysNewerThan(relid, src, v);
		if (t.modes.mode == Mode::Handler) {
			TruncateWithHandler(t, keep, req, dk, as);
		} else if (keep == "{}") {
			TruncateTarget(t, as, req.restart_identity);
		} else {
			Params del;
			del.AddText(keep);
			Execute("DELETE FROM " + t.own_rows + " AS t WHERE " + CompactKeySql(t) +
			            " OPERATOR(pg_catalog.<>) ALL ($1::pg_catalog.text[])",
			        del, as);
		}
		Params p;
		p.AddOid(relid);
		p.AddText(source);
		p.AddText(v.ToArrayLiteral());
		Execute("INSERT INTO cdc.table_barrier AS b (target, source_name, version) VALUES ($1, $2, $3::pg_catalog.int8[]) "
		        "ON CONFLICT (target) DO UPDATE SET source_name = EXCLUDED.source_name, version = EXCLUDED.version, "
		        "truncated_at = pg_catalog.now()",
		        p, true);
		DropEntityRecordsUpTo(relid, src, v);
		t.barrier = Barrier{source, v};
		cnt.applied++;
		if (t.mapping.outbox && WriteOutbox(t, req.source, 't', v, "", std::nullopt))
			cnt.outbox_rows++;
		return Outcome::Applied;
	}

	/* non-key values are converted once the change is to be applied (Complete) */
	PreparedChange prep = PrepareChange(t, req, as, /* keys_only */ true);
	const bool is_delete = prep.is_delete;
	std::optional<Image> &after = prep.after, &before = prep.before;
	Image &main = is_delete ? *prep.before : *prep.after;
	const std::string &entity_key = prep.entity_key;
	const Version &v = prep.version;
	const std::string &dk = prep.delivery_key;
	SetContext(&t, dk);
	/*
	 * The dedup claim.  When the ledger already has the delivery the change
	 * still goes through the version decision (under the entity lock), but
	 * only an "applied" decision counts: it proves the change new, so the
	 * ledger hit was a digest collision.  Anything else is a duplicate.
	 */
	const int32_t now_s = TransactionSeconds();
	if (stream) {
		if (!stream_new(v, req.IsSnapshot())) {
			cnt.duplicate++;
			return Outcome::Duplicate;
		}
		stream_advance(v);
	}
	const bool claimed_before = !stream && !TakeClaim(dk, relid, now_s);
	const int32_t src = SourceId(source, source_ids_);

	/*
	 * The hash covers what the event sent, so a replay compares equal;
	 * computed when needed (Complete): "0" for deletes and stream ordering.
	 */
	const bool hash_needed = !is_delete && !stream;
	Image *image = &main;
	Image moved; /* the after-image with unsent columns taken from the row under the old key */

	/* An update whose before-image carries another key: delete the old key first. */
	if (req.op == Op::Update && before && !SameKey(t, *before, *after)) {
		/*
		 * The columns the row takes from its old key: those the source sent
		 * as unavailable (unchanged TOAST), and in state mode those the event
		 * does not carry (a destination-only column, one outside the
		 * publication's column list) except generated ones, which the
		 * destination computes.  An update keeps their values, so the moved
		 * row keeps them too, as PostgreSQL's own apply keeps them when it
		 * updates the row's key in place (TAP 164, t_seq and t_keep).
		 */
		std::vector<int> unsent;
		for (size_t i = 0; i < t.columns.size(); i++) {
			const Cell &cell = after->cells[i];
			if (cell.present ? cell.unavailable : t.modes.mode == Mode::State && !t.columns[i].generated)
				unsent.push_back(int(i));
		}
		std::optional<std::vector<std::optional<std::string>>> captured;
		EntityChange old;
		old.t = &t;
		old.source_info = &req.source;
		old.is_snapshot = false;
		old.is_delete = true;
		old.key_img = &*before;
		old.image = &*before;
		old.entity_key = EntityKey(t, *before, "before");
		old.compact_key = CompactKey(t, *before);
		old.version = v;
		old.source = source;
		old.src = src;
		old.now_s = now_s;
		old.claimed_before = claimed_before;
		old.pending[0] = &*before;
		old.content_hash = "0";
		old.delivery_key = dk;
		old.op = 'd';
		old.stream = stream;
		old.as = as;
		if (!unsent.empty()) {
			old.capture_cols = &unsent;
			old.captured = &captured;
		}
		/* One event, one outcome: the implied delete adds only its outbox row to the counts. */
		Counters implied;
		Outcome implied_outcome = ApplyEntity(old, implied);
		cnt.outbox_rows += implied.outbox_rows;
		/*
		 * The row moved: columns the source did not send, or the event does
		 * not carry, keep the values they had under the old key (SPEC §4.4).  Only when the implied delete
		 * applied and removed a row; otherwise the unsent columns stay
		 * unavailable and the decision below treats them as usual.
		 */
		if (implied_outcome == Outcome::Applied && captured) {
			CompleteImage(t, *after, as); /* its values are copied: converted first */
			moved = *after;
			for (size_t j = 0; j < unsent.size(); j++) {
				size_t i = size_t(unsent[j]);
				Cell &cell = moved.cells[i];
				const Column &col = t.columns[i];
				cell.present = true;
				cell.unavailable = false;
				cell.pending = false;
				const std::optional<std::string> &text = (*captured)[j];
				if (!text) {
					cell.isnull = true;
					continue;
				}
				cell.value = PgCallAs(col.user_type ? as : RunAs::Caller(), [&]() {
					return InputInSettledSettingsPg(col.in_fn, const_cast<char *>(text->c_str()), col.ioparam, col.typmod);
				});
				cell.text = *text;
				cell.isnull = false;
			}
			moved.has_unavailable = false;
			image = &moved;
		}
		cnt.expired += implied.expired;
	}

	EntityChange c;
	c.t = &t;
	c.source_info = &req.source;
	c.is_snapshot = req.IsSnapshot();
	c.is_delete = is_delete;
	c.key_img = image;
	c.image = image;
	c.entity_key = entity_key;
	c.compact_key = CompactKey(t, main);
	c.version = v;
	c.source = source;
	c.src = src;
	c.now_s = now_s;
	c.claimed_before = claimed_before;
	c.pending[0] = after ? &*after : nullptr;
	c.pending[1] = before ? &*before : nullptr;
	c.hash_of = hash_needed ? &main : nullptr;
	c.content_hash = hash_needed ? std::string() : std::string("0");
	c.delivery_key = dk;
	c.op = OpName(req.op)[0];
	c.stream = stream;
	c.as = as;
	return ApplyEntity(c, cnt);
}

} // namespace cdc::pg
