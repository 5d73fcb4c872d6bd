// The set-based segment of a batch (docs/semantics.md, "Batches"): the
// changes between two truncates, claimed with one statement, grouped by
// entity, locked and decided in memory (Chain, Simulate), then written with
// one statement per target and kind: entity records, rows (collapsed to the
// final image where CollapseAllowed, else round by round) and, through
// outbox.cpp, the outbox rows in input order.  What cannot be decided in
// memory goes change by change (single.cpp) with the claim already made.
//
// Glue, C++ regime: statements through SPI in the caller's transaction.
// Must give the result of applying the changes one by one, in order;
// anything it cannot prove that for goes to the change-by-change path.
#include "core/errors.hpp"
#include "pg/apply/internal.hpp"
#include "pg/apply/target.hpp"
#include "pg/spi.hpp"
#include "core/batch_plan.hpp"
#include "core/layout.hpp"
#include "pg/apply/engine.hpp"
#include "pg/apply/image.hpp"
#include "pg/apply/outbox.hpp"
#include "pg/apply/state_store.hpp"
#include "pg/apply/table_write.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
}

#include <algorithm>
#include <set>
#include <stdexcept>
#include <unordered_map>

namespace cdc::pg {

namespace {


/*
 * May the changes of a segment on this target be decided in memory and
 * written with one statement per kind (set-based), instead of change by
 * change?  Only if writing a row earlier, later, or an intermediate image
 * not at all can be seen in that row alone: the rows are independent
 * (IndependentRowsPg: no triggers, so no foreign keys either, no rules, no
 * row-level security, no CHECK constraints, no unique index besides the
 * key), every column has an array type (the rows travel as one array per
 * column), and the key's text form identifies a row (types whose equality
 * is equality of their output text, so two entity keys never name one row;
 * text keys only under a deterministic collation).  A GENERATED ALWAYS
 * identity column that is not the key is left to MutateTarget, which checks
 * that an update does not change it.
 * Only state mappings: in history mode every change is a row, in handler
 * mode a call that sees the row of that moment (docs/semantics.md, "Modes").
 * The expired policy and the prune watermark need no exclusion here:
 * Simulate() hands every change they could affect to the change-by-change
 * path.
 */
bool
SetBasedAllowed(const Target &t)
{
	if (t.modes.mode != Mode::State || !t.independent_rows || t.has_nonkey_identity_always)
		return false;
	bool assignable = false; /* some column an upsert's DO UPDATE SET can write */
	for (const Column &c : t.columns) {
		if (!c.generated && !OidIsValid(c.array_type))
			return false;
		assignable = assignable || (!c.generated && !c.identity_always);
	}
	if (!assignable)
		return false;
	for (int k : t.key) {
		const Column &c = t.columns[size_t(k)];
		switch (c.type) {
		case TEXTOID:
		case VARCHAROID:
		case NAMEOID:
			/* under a nondeterministic collation 'A' and 'a' can be one row */
			if (!c.deterministic)
				return false;
			break;
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case UUIDOID:
		case BOOLOID:
		case DATEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID: break;
		default: return false;
		}
	}
	return true;
}

/*
 * May several changes of one entity inside a batch be merged into the
 * newest one, writing only the final entity record and row?  Set-based
 * targets, and for a mapping with outbox rows only when each applied
 * change's payload is known without reading the row back: the row an
 * upsert leaves is its image (PayloadFromImageAllowed: no generated
 * columns; set-based: no triggers or rules; merged chains carry full
 * images, so no default is evaluated), and the row a delete removes is the
 * previous applied image of its chain, or the row before the batch (read
 * once), or none.  Such targets' outbox rows still get one row per applied
 * change (WriteMergedWithOutbox).  NOT NULL is checked per image
 * (ViolatesNotNull), and a merged change must carry all columns
 * (FullImage), so no column default is evaluated either way.  Outbox
 * targets with generated columns are written round by round, each payload
 * read back with RETURNING.
 */
bool
CollapseAllowed(const Target &t)
{
	return SetBasedAllowed(t) && (!t.mapping.outbox || PayloadFromImageAllowed(t));
}

// Does an upsert image carry every column the destination does not compute
// itself, none of them unavailable?  (Deletes need only the key.)
bool
FullImage(const Target &t, const PreparedChange &p)
{
	if (p.is_delete)
		return true;
	for (size_t i = 0; i < t.columns.size(); i++) {
		const Cell &cell = p.after->cells[i];
		if (!t.columns[i].generated && (!cell.present || cell.unavailable))
			return false;
	}
	return true;
}

// Would writing this after-image fail a NOT NULL constraint?
bool
ViolatesNotNull(const Target &t, const Image &img)
{
	for (size_t i = 0; i < t.columns.size(); i++)
		if (t.columns[i].not_null && !t.columns[i].generated && img.cells[i].isnull)
			return true;
	return false;
}

bool
IsKeyChange(const Target &t, const ChangeRequest &req, const PreparedChange &p)
{
	return req.op == Op::Update && p.before && p.after && !SameKey(t, *p.before, *p.after);
}

// Claims the delivery keys of changes `which` of a segment (indexes into
// target and prep, ascending) in cdc.ledger in input order, through the
// executor (state_direct.hpp) or else with one statement (the digests of
// pg/state_store.hpp, ClaimDelivery).  Returns per change of `which` whether
// its claim is new: false when the ledger had the digest
// already, or an earlier change of the segment claimed it (the same delivery
// twice in one batch).  As one by one, a change whose claim is not new still
// goes through the version decision (Simulate, ApplyEntity).
std::vector<char>
ClaimAll(const std::vector<Target *> &target, const std::vector<PreparedChange> &prep, const std::vector<size_t> &which,
         int32_t now_s)
{
	const size_t n = which.size();
	std::vector<int64> digest(n);
	std::vector<Oid> relid(n);
	for (size_t k = 0; k < n; k++) {
		digest[k] = LedgerDigest(target[which[k]]->relid, prep[which[k]].delivery_key);
		relid[k] = target[which[k]]->relid;
	}
	std::vector<char> claimed(n);
	if (n == 0)
		return claimed;
	if (PgCallAs(RunAs::ExtensionOwner(), [&]() {
		    return ClaimDeliveriesDirectPg(int(n), digest.data(), relid.data(), now_s, claimed.data());
	    }) != kNotDirect)
		return claimed;
	ArrayParam digests(INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
	ArrayParam targets(OIDOID, sizeof(Oid), true, TYPALIGN_INT);
	for (size_t k = 0; k < n; k++) {
		digests.Add(Int64GetDatum(digest[k]), false);
		targets.Add(ObjectIdGetDatum(relid[k]), false);
	}
	Params p;
	digests.AddTo(p, INT8ARRAYOID);
	targets.AddTo(p, OIDARRAYOID);
	p.Add(INT4OID, Int32GetDatum(now_s), false);
	uint64_t rows = Execute("INSERT INTO cdc.ledger (digest, target, claimed_s) "
	                        "SELECT x.d, x.t::pg_catalog.regclass, $3 "
	                        "FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) WITH ORDINALITY AS x(d, t, ord) "
	                        "ORDER BY x.ord ON CONFLICT (digest) DO NOTHING RETURNING digest",
	                        p, true);
	std::multiset<int64_t> inserted;
	for (uint64_t i = 0; i < rows; i++)
		inserted.insert(std::stoll(ResultText(i, 1).value_or("0")));
	for (size_t k = 0; k < n; k++) {
		auto it = inserted.find(digest[k]);
		claimed[k] = it != inserted.end();
		if (claimed[k])
			inserted.erase(it);
	}
	return claimed;
}

// A chain of the batch planner (core/batch_plan.hpp): the changes of one
// entity within a segment and what the batch decided for them, with the
// target whose entity it is.
struct Chain : cdc::Chain {
	Target *t = nullptr;
	EntityLocation loc; /* where FindRecords' direct path found `stored` (locked or not) */
};

// The compact keys of chains, for the direct writers (pointing into them).
std::vector<EntityKeyRef>
KeyRefs(const std::vector<Chain *> &list)
{
	std::vector<EntityKeyRef> keys;
	keys.reserve(list.size());
	for (const Chain *c : list)
		keys.push_back(EntityKeyRef{c->compact_key.data(), int(c->compact_key.size())});
	return keys;
}

// Reads the entity records of chains (per target, through the executor,
// state_direct.hpp, or else one statement): locked, as LockEntityRecord
// does for one, or (`lock` false, direct path only) unlocked, for an
// UpdateRecords that reports the records changed since.  Where the direct
// path cannot read them, the statement locks them either way.
void
FindRecords(std::vector<Chain *> &chains, const std::map<std::string, int32_t> &source_ids, bool lock)
{
	std::map<Oid, std::vector<Chain *>> by_target;
	for (Chain *c : chains)
		by_target[c->t->relid].push_back(c);
	for (auto &[relid, list] : by_target) {
		const size_t arity = list.front()->t->version_col >= 0 ? 3 : 4;
		std::vector<EntityKeyRef> refs = KeyRefs(list);
		std::vector<EntityRow> found_rows(list.size());
		std::vector<EntityLocation> locs(list.size());
		std::vector<char> found(list.size());
		for (Chain *c : list)
			c->stored.reset();
		if (PgCallAs(RunAs::ExtensionOwner(), [&]() {
			    return lock ? LockEntityRecordsDirectPg(relid, int(list.size()), refs.data(), found_rows.data(),
			                                            locs.data(), found.data())
			                : ReadEntityRecordsDirectPg(relid, int(list.size()), refs.data(), found_rows.data(),
			                                            locs.data(), found.data());
		    }) != kNotDirect) {
			for (size_t i = 0; i < list.size(); i++) {
				list[i]->loc = locs[i];
				if (!found[i])
					continue;
				std::optional<std::string> name = SourceNameOf(found_rows[i].src, source_ids);
				if (!name)
					continue; /* as the join with cdc.source did: a record of no source is no record */
				list[i]->stored = EntityRecordOfRow(found_rows[i], arity);
				list[i]->stored->source = std::move(*name);
			}
			continue;
		}
		ArrayParam keys = ArrayParam::Text();
		for (Chain *c : list) {
			keys.AddText(c->compact_key);
			c->loc = EntityLocation{};
		}
		Params p;
		p.AddOid(relid);
		keys.AddTo(p, TEXTARRAYOID);
		/*
		 * A LATERAL subquery with FOR UPDATE is never flattened: one index
		 * probe per key, whatever the statistics.  Columns read as Datums;
		 * source names from the call's sources (SourceNameOf).
		 */
		uint64_t n = Execute("SELECT x.ord, s.src, s.v0, s.v1, s.v2, s.v3, s.deleted, s.chash "
		                     "FROM pg_catalog.unnest($2) WITH ORDINALITY AS x(k, ord), "
		                     "LATERAL (SELECT e.src, e.v0, e.v1, e.v2, e.v3, e.deleted, e.chash "
		                     "FROM cdc.entity_state e "
		                     "WHERE e.target OPERATOR(pg_catalog.=) $1 AND e.key OPERATOR(pg_catalog.=) x.k "
		                     "FOR UPDATE OF e) s",
		                     p, true);
		std::vector<std::pair<size_t, int32_t>> rows; /* (ord, src): names are looked up after the result is read */
		std::vector<EntityRecord> records;
		for (uint64_t i = 0; i < n; i++) {
			rows.emplace_back(size_t(ResultInt(i, 1).value_or(0)), int32_t(ResultInt(i, 2).value_or(0)));
			records.push_back(EntityRecordFromResult(i, 3, arity));
		}
		for (size_t i = 0; i < rows.size(); i++) {
			std::optional<std::string> name = SourceNameOf(rows[i].second, source_ids);
			if (!name)
				continue; /* as the join with cdc.source did: a record of no source is no record */
			records[i].source = std::move(*name);
			list[rows[i].first - 1]->stored = std::move(records[i]);
		}
	}
}

// The prune watermarks of the targets of `chains`: (target, source id) ->
// version.  Read after the entity locks in a statement of its own, so that
// it sees a concurrent cdc.prune() that removed a tombstone the locks waited
// for (docs/retention.md, "Concurrency").
std::map<std::pair<Oid, int32_t>, Version>
ReadWatermarks(const std::vector<Chain *> &chains)
{
	std::map<Oid, size_t> arity;
	for (const Chain *c : chains)
		arity[c->t->relid] = c->t->version_col >= 0 ? 3 : 4;
	std::map<std::pair<Oid, int32_t>, Version> out;
	for (const auto &[relid, n_parts] : arity) {
		Params p;
		p.AddOid(relid);
		uint64_t n = Execute("SELECT src, v0, v1, v2, v3 FROM cdc.prune_watermark WHERE target OPERATOR(pg_catalog.=) $1",
		                     p, true);
		for (uint64_t i = 0; i < n; i++) {
			StoredVersion sv;
			int32_t src = int32_t(std::stol(ResultText(i, 1).value_or("0")));
			sv.v0 = std::stoi(ResultText(i, 2).value_or("0"));
			sv.v1 = std::stoll(ResultText(i, 3).value_or("0"));
			sv.v2 = std::stoll(ResultText(i, 4).value_or("0"));
			sv.v3 = std::stoi(ResultText(i, 5).value_or("0"));
			out[{relid, src}] = FromStoredVersion(sv, n_parts);
		}
	}
	return out;
}

// For the claimed upserts of `chains` whose version equals their entity's
// record before the batch: the content hash Simulate compares, adopted
// from release 0.1.0's hashing where that one matches the record
// (AdoptReleaseHash; as ApplyEntity does one by one).
void
AdoptReleaseHashes(const std::vector<Chain *> &chains, std::vector<SimInput> &sim,
                   const std::vector<PreparedChange> &prep)
{
	for (const Chain *c : chains) {
		if (!c->stored)
			continue;
		for (size_t k : c->events)
			if (sim[k].claimed && !prep[k].is_delete && Version::Compare(sim[k].version, c->stored->version) == 0)
				sim[k].content_hash =
					AdoptReleaseHash(*c->t, prep[k].Main(), sim[k].content_hash, c->stored->content_hash);
	}
}

// The rows of the arrays of AddRecordArrays, for a FROM clause.
constexpr const char *kRecordArrays =
	"FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4), pg_catalog.unnest($5), "
	"pg_catalog.unnest($6), pg_catalog.unnest($7), pg_catalog.unnest($8), pg_catalog.unnest($9)) "
	"AS x(k, s, v0, v1, v2, v3, d, h) ";

// The final records of chains as stored rows.
std::vector<EntityRow>
FinalRows(const std::vector<Chain *> &list, const std::map<std::string, int32_t> &source_ids, int32_t now_s)
{
	std::vector<EntityRow> rows;
	rows.reserve(list.size());
	for (const Chain *c : list) {
		const EntityRecord &r = *c->final_record;
		rows.push_back(EntityRowOf(source_ids.at(r.source), r.version, r.deleted, r.content_hash, now_s));
	}
	return rows;
}

// The records of chains (`rows`, FinalRows) as arrays of
// cdc.entity_state's columns: $2 key, $3 src, $4 v0, $5 v1, $6 v2, $7 v3,
// $8 deleted, $9 chash ($1 is the target, $10 the write time).
void
AddRecordArrays(Params &p, const std::vector<Chain *> &list, const std::vector<EntityRow> &rows)
{
	ArrayParam keys = ArrayParam::Text();
	ArrayParam srcs(INT4OID, sizeof(int32), true, TYPALIGN_INT);
	ArrayParam v0(INT4OID, sizeof(int32), true, TYPALIGN_INT), v3(INT4OID, sizeof(int32), true, TYPALIGN_INT),
	    chash(INT4OID, sizeof(int32), true, TYPALIGN_INT);
	ArrayParam v1(INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE),
	    v2(INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
	ArrayParam deleted(BOOLOID, 1, true, TYPALIGN_CHAR);
	for (size_t i = 0; i < list.size(); i++) {
		const EntityRow &r = rows[i];
		keys.AddText(list[i]->compact_key);
		srcs.Add(Int32GetDatum(r.src), false);
		v0.Add(Int32GetDatum(r.v0), false);
		v1.Add(Int64GetDatum(r.v1), false);
		v2.Add(Int64GetDatum(r.v2), false);
		v3.Add(Int32GetDatum(r.v3), false);
		deleted.Add(BoolGetDatum(r.deleted), false);
		chash.Add(Int32GetDatum(r.chash), false);
	}
	keys.AddTo(p, TEXTARRAYOID);
	srcs.AddTo(p, INT4ARRAYOID);
	v0.AddTo(p, INT4ARRAYOID);
	v1.AddTo(p, INT8ARRAYOID);
	v2.AddTo(p, INT8ARRAYOID);
	v3.AddTo(p, INT4ARRAYOID);
	deleted.AddTo(p, BOOLARRAYOID);
	chash.AddTo(p, INT4ARRAYOID);
}

/*
 * Inserts the final records of new entities (per target, through the
 * executor or else one statement), as WriteEntityRecord does for one.  Returns the chains whose record a
 * concurrent transaction created first (ON CONFLICT DO NOTHING inserted
 * nothing for them).
 */
std::vector<Chain *>
InsertRecords(const std::vector<Chain *> &chains, const std::map<std::string, int32_t> &source_ids, int32_t now_s)
{
	std::map<Oid, std::vector<Chain *>> by_target;
	for (Chain *c : chains)
		by_target[c->t->relid].push_back(c);
	std::vector<Chain *> lost;
	for (auto &[relid, list] : by_target) {
		std::vector<EntityRow> rows = FinalRows(list, source_ids, now_s);
		std::vector<EntityKeyRef> refs = KeyRefs(list);
		std::vector<char> inserted_direct(list.size());
		if (PgCallAs(RunAs::ExtensionOwner(), [&]() {
			    return InsertEntityRecordsDirectPg(relid, int(list.size()), refs.data(), rows.data(),
			                                       inserted_direct.data());
		    }) != kNotDirect) {
			for (size_t i = 0; i < list.size(); i++)
				if (!inserted_direct[i])
					lost.push_back(list[i]);
			continue;
		}
		Params p;
		p.AddOid(relid);
		AddRecordArrays(p, list, rows);
		p.Add(INT4OID, Int32GetDatum(now_s), false);
		uint64_t n = Execute("INSERT INTO cdc.entity_state (target, key, src, v0, v1, v2, v3, deleted, chash, touched_s) "
		                     "SELECT $1, x.k, x.s, x.v0, x.v1, x.v2, x.v3, x.d, x.h, $10 " +
		                         std::string(kRecordArrays) + "ON CONFLICT (target, key) DO NOTHING RETURNING key",
		                     p, true);
		if (n == list.size())
			continue;
		std::set<std::string> inserted;
		for (uint64_t i = 0; i < n; i++)
			inserted.insert(ResultText(i, 1).value_or(""));
		for (Chain *c : list)
			if (!inserted.count(c->compact_key))
				lost.push_back(c);
	}
	return lost;
}

// Writes the final records of entities that had one, found by FindRecords:
// per target, by the TIDs its direct path found (state_direct.hpp), else
// one statement (ON CONFLICT finds each through the key index; the
// statement's FindRecords locked them).  Returns the chains whose record,
// read unlocked, another transaction changed since (nothing written for
// them).
std::vector<Chain *>
UpdateRecords(const std::vector<Chain *> &chains, const std::map<std::string, int32_t> &source_ids, int32_t now_s)
{
	std::map<Oid, std::vector<Chain *>> by_target;
	for (Chain *c : chains)
		by_target[c->t->relid].push_back(c);
	std::vector<Chain *> lost;
	for (auto &[relid, list] : by_target) {
		std::vector<EntityRow> rows = FinalRows(list, source_ids, now_s);
		std::vector<EntityKeyRef> refs = KeyRefs(list);
		std::vector<EntityLocation> locs;
		bool unlocked = false;
		for (const Chain *c : list) {
			locs.push_back(c->loc);
			unlocked = unlocked || (c->loc.valid && !c->loc.locked);
		}
		std::vector<char> changed(list.size());
		if (PgCallAs(RunAs::ExtensionOwner(), [&]() {
			    return UpdateEntityRecordsDirectPg(relid, int(list.size()), refs.data(), locs.data(), rows.data(),
			                                       changed.data());
		    }) != kNotDirect) {
			for (size_t i = 0; i < list.size(); i++)
				if (changed[i])
					lost.push_back(list[i]);
			continue;
		}
		if (unlocked) {
			/* the statement would write over a concurrent change of a record read unlocked: lock them first */
			lost.insert(lost.end(), list.begin(), list.end());
			continue;
		}
		Params p;
		p.AddOid(relid);
		AddRecordArrays(p, list, rows);
		p.Add(INT4OID, Int32GetDatum(now_s), false);
		Execute("INSERT INTO cdc.entity_state AS e (target, key, src, v0, v1, v2, v3, deleted, chash, touched_s) "
		        "SELECT $1, x.k, x.s, x.v0, x.v1, x.v2, x.v3, x.d, x.h, $10 " +
		            std::string(kRecordArrays) + "ON CONFLICT (target, key) DO UPDATE SET src = EXCLUDED.src, v0 = EXCLUDED.v0, v1 = EXCLUDED.v1, "
		        "v2 = EXCLUDED.v2, v3 = EXCLUDED.v3, deleted = EXCLUDED.deleted, chash = EXCLUDED.chash, "
		        "touched_s = EXCLUDED.touched_s",
		        p, true);
	}
	return lost;
}

// Which rows a WriteRows statement returns (as jsonb, for outbox payloads).
enum class Returning { None, Deletes, All };

// The (bigint) ordinal in column `col` of every result row.
std::vector<int64_t>
ResultOrdinals(uint64_t n, int col)
{
	std::vector<int64_t> out(n);
	PgCall([&]() {
		for (uint64_t i = 0; i < n; i++) {
			bool isnull;
			out[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, col, &isnull));
		}
	});
	return out;
}

// The key columns of `keys` as array parameters, with "k1, k2, ..." for
// the unnest alias and the predicate "t.c1 = x.k1 AND ..." (the types'
// schema-qualified equality operators).
void
KeyArrays(const Target &t, const std::vector<const Image *> &keys, Params &p, std::string &names, std::string &where)
{
	for (size_t i = 0; i < t.key.size(); i++) {
		const Column &col = t.columns[size_t(t.key[i])];
		ArrayParam a(col.type, col.typlen, col.typbyval, col.typalign);
		for (const Image *img : keys)
			a.Add(img->cells[size_t(t.key[i])].value, false);
		a.AddTo(p, col.array_type);
		names += "k" + std::to_string(i + 1) + ", ";
		where += std::string(i ? " AND " : "") + "t." + QuoteIdent(col.name) + " " + col.eq_op + " x.k" +
		         std::to_string(i + 1);
	}
}

// "ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), ...)" over
// every parameter of `p`: the rows of the array parameters side by side,
// like a multi-argument unnest, with the function schema-qualified.
// "pg_catalog.unnest($1), pg_catalog.unnest($2), ...": the same rows as a
// select list, where (unlike in FROM) an array of a composite type yields
// one column of that type instead of the type's fields.
std::string
UnnestColumns(const Params &p)
{
	std::string s;
	for (int i = 1; i <= p.Count(); i++)
		s += (i > 1 ? ", pg_catalog.unnest($" : "pg_catalog.unnest($") + std::to_string(i) + ")";
	return s;
}

std::string
UnnestAll(const Params &p)
{
	std::string s = "ROWS FROM (";
	for (int i = 1; i <= p.Count(); i++)
		s += (i > 1 ? ", pg_catalog.unnest($" : "pg_catalog.unnest($") + std::to_string(i) + ")";
	return s + ")";
}

/*
 * Writes one image per entity to the target with one upsert and one delete
 * statement: writes[i] = (segment index of the change, chain).  Each entity
 * appears at most once, so no statement touches a row twice.  Returns the
 * resulting (upsert) or removed (delete) row of each write as jsonb where
 * `returning` asks for it (for outbox payloads; nullopt: not asked, or a
 * delete found no row).  absent[i]: write i's row is expected to be new
 * (RowExpectedAbsent), so it is inserted first (UpsertRowsDirect).
 */
std::vector<std::optional<Datum>>
WriteRows(const Target &t, const std::vector<std::pair<size_t, const Chain *>> &writes,
          const std::vector<PreparedChange> &prep, Returning returning, const RunAs &as,
          const std::vector<char> &absent)
{
	std::vector<std::optional<Datum>> rows(writes.size());
	std::vector<size_t> upserts, deletes;
	for (size_t i = 0; i < writes.size(); i++)
		(prep[writes[i].first].is_delete ? deletes : upserts).push_back(i);

	bool upserted = false;
	if (!upserts.empty() && returning != Returning::All) {
		/* As PostgreSQL's own apply writes them, without SQL (table_write.hpp). */
		std::vector<const Image *> images;
		std::vector<char> upsert_absent;
		images.reserve(upserts.size());
		for (size_t i : upserts) {
			images.push_back(&*prep[writes[i].first].after);
			upsert_absent.push_back(absent[i]);
		}
		upserted = UpsertRowsDirect(t, images, as, &upsert_absent);
	}
	if (!upserts.empty() && !upserted) {
		Params p;
		std::string cols, set, conflict;
		for (size_t c = 0; c < t.columns.size(); c++) {
			const Column &col = t.columns[c];
			if (col.generated)
				continue;
			ArrayParam a(col.type, col.typlen, col.typbyval, col.typalign);
			for (size_t i : upserts) {
				const Cell &cell = prep[writes[i].first].after->cells[c];
				a.Add(cell.value, cell.isnull);
			}
			a.AddTo(p, col.array_type);
			std::string q = QuoteIdent(col.name);
			cols += (cols.empty() ? "" : ", ") + q;
			/* an identity key column here (SetBasedAllowed): equal to the conflicting row's, never assigned */
			if (!col.identity_always)
				set += (set.empty() ? "" : ", ") + q + " = EXCLUDED." + q;
		}
		for (size_t i = 0; i < t.key.size(); i++)
			conflict += (i ? ", " : "") + QuoteIdent(t.columns[size_t(t.key[i])].name);
		const bool back = returning == Returning::All;
		/*
		 * OVERRIDING SYSTEM VALUE: a GENERATED ALWAYS identity key takes the
		 * source's value, as PostgreSQL's own apply writes it (B31).
		 */
		uint64_t n = Execute("INSERT INTO " + t.qualified + " AS t (" + cols + ")" +
		                         (t.has_identity_always ? " OVERRIDING SYSTEM VALUE" : "") + " SELECT " + UnnestColumns(p) +
		                         " ON CONFLICT (" + conflict + ") DO UPDATE SET " + set +
		                         (back ? " RETURNING " + RowDatumSql("t", t.qualified) : ""),
		                     p, as);
		if (back) {
			std::vector<std::optional<Datum>> j = ResultRowsJsonb(n, 1, as);
			for (uint64_t r = 0; r < n && r < upserts.size(); r++)
				rows[upserts[r]] = j[r];
		}
	}
	if (!deletes.empty()) {
		std::vector<const Image *> keys;
		for (size_t d : deletes)
			keys.push_back(&*prep[writes[d].first].before);
		const bool back = returning != Returning::None;
		/* As PostgreSQL's own apply deletes them, without SQL (table_write.hpp). */
		std::vector<std::optional<Datum>> removed;
		if (FindRowsDirect(t, keys, /* remove */ true, back ? &removed : nullptr, as)) {
			for (size_t r = 0; r < removed.size(); r++)
				rows[deletes[r]] = removed[r];
			return rows;
		}
		Params p;
		std::string names, where;
		KeyArrays(t, keys, p, names, where);
		/*
		 * The rows are found by one index probe per key (a LATERAL subquery
		 * with OFFSET 0 is never flattened into a join) and deleted by ctid,
		 * so the cost follows the batch, not the table, whatever the
		 * statistics the cached plan was made with.  They are locked first,
		 * by a statement of their own: a row a concurrent transaction is
		 * updating is waited for and its new version locked (or, under
		 * REPEATABLE READ, 40001 raised), so the DELETE, with the next
		 * statement's snapshot, finds that version by its key.  In one
		 * statement the DELETE's recheck of the new version would compare
		 * its ctid with the old one's, skip the row, and count the delete
		 * as applied all the same.
		 */
		Execute("SELECT 1 FROM " + UnnestAll(p) + " AS x(" + names.substr(0, names.size() - 2) +
		            "), LATERAL (SELECT 1 FROM " + t.own_rows + " AS t WHERE " + where + " OFFSET 0 FOR UPDATE) l",
		        p, as);
		uint64_t n = Execute("WITH d AS MATERIALIZED (SELECT x.ord, l.c FROM " + UnnestAll(p) +
		                         " WITH ORDINALITY AS x(" + names + "ord), LATERAL (SELECT t.ctid AS c FROM " +
		                         t.own_rows + " AS t WHERE " + where + " OFFSET 0) l) DELETE FROM " + t.own_rows +
		                         " AS t USING d WHERE t.ctid OPERATOR(pg_catalog.=) d.c AND t.ctid OPERATOR(pg_catalog.=) "
		                         "ANY (ARRAY(SELECT c FROM d))" +
		                         (back ? " RETURNING d.ord, " + RowDatumSql("t", t.qualified) : ""),
		                     p, as);
		if (back) {
			std::vector<int64_t> ord = ResultOrdinals(n, 1);
			std::vector<std::optional<Datum>> j = ResultRowsJsonb(n, 2, as);
			for (uint64_t r = 0; r < n; r++)
				if (ord[r] >= 1 && size_t(ord[r]) <= deletes.size())
					rows[deletes[size_t(ord[r]) - 1]] = j[r];
		}
	}
	return rows;
}

// The current rows (as jsonb) of the keys of `keys`, one index probe each
// in one statement: nullopt where there is none.
std::vector<std::optional<Datum>>
ReadRows(const Target &t, const std::vector<const Image *> &keys, const RunAs &as)
{
	std::vector<std::optional<Datum>> rows(keys.size());
	/*
	 * Without SQL where the table allows it (table_write.hpp): the rows are
	 * locked as well, which the chain's upsert in the same batch does anyway.
	 */
	if (FindRowsDirect(t, keys, /* remove */ false, &rows, as))
		return rows;
	Params p;
	std::string names, where;
	KeyArrays(t, keys, p, names, where);
	/*
	 * Locked (FOR UPDATE) as well: a row a concurrent transaction is
	 * updating is waited for and read in its new version, the row the
	 * chain's delete then removes (without the lock the delete's payload
	 * was the row before that update).
	 */
	uint64_t n = Execute("SELECT x.ord, l.j FROM " + UnnestAll(p) + " WITH ORDINALITY AS x(" + names +
	                         "ord), LATERAL (SELECT " + RowDatumSql("t", t.qualified) + " AS j FROM " + t.own_rows + " AS t WHERE " +
	                         where + " OFFSET 0 FOR UPDATE) l",
	                     p, as);
	std::vector<int64_t> ord = ResultOrdinals(n, 1);
	std::vector<std::optional<Datum>> j = ResultRowsJsonb(n, 2, as);
	for (uint64_t r = 0; r < n; r++)
		if (ord[r] >= 1 && size_t(ord[r]) <= keys.size())
			rows[size_t(ord[r]) - 1] = j[r];
	return rows;
}

/*
 * The rows of a merged outbox target (CollapseAllowed with outbox): only
 * the final image of each entity is written (one upsert and one delete
 * statement), and every applied non-snapshot change still gets its own
 * outbox row with the payload one by one would give it, found by replaying
 * the chain's row in memory: an upsert leaves its image (PayloadFromImage,
 * built once from the Datums), a delete removes the row the previous
 * applied change of the chain left, or, for a chain whose first applied
 * change is a delete, the row before the batch: that is what the merged
 * delete removes and returns when the chain also ends with a delete, and it
 * is read first (ReadRows) when the chain ends with an upsert.  A delete
 * that finds no row publishes the event's before-image, as one by one.
 * The rows are queued with their input positions (FlushOutbox sorts them).
 */
void
WriteMergedWithOutbox(const Target &t, const std::vector<const Chain *> &list, const std::vector<PreparedChange> &prep,
                      const ChangeRequest *reqs, DeferredOutbox &queue, const RunAs &as,
                      const std::vector<RowEffect> &effects)
{
	std::vector<std::pair<size_t, const Chain *>> writes;
	std::vector<char> absent;
	std::vector<const Chain *> read_first;
	std::vector<const Image *> read_keys;
	for (const Chain *c : list) {
		writes.emplace_back(c->applied.back(), c);
		absent.push_back(RowExpectedAbsent(*c, /* collapse */ true, 0, effects) ? 1 : 0);
		if (prep[c->applied.front()].is_delete && !prep[c->applied.back()].is_delete) {
			read_first.push_back(c);
			read_keys.push_back(&*prep[c->applied.front()].before);
		}
	}
	std::map<const Chain *, std::optional<Datum>> before_batch;
	if (!read_first.empty()) {
		std::vector<std::optional<Datum>> rows = ReadRows(t, read_keys, as);
		for (size_t i = 0; i < read_first.size(); i++)
			before_batch[read_first[i]] = rows[i];
	}
	std::vector<std::optional<Datum>> removed =
		WriteRows(t, writes, prep, Returning::Deletes, as, absent);
	for (size_t i = 0; i < writes.size(); i++) {
		const Chain *c = writes[i].second;
		if (prep[c->applied.front()].is_delete && prep[c->applied.back()].is_delete)
			before_batch[c] = removed[i];
	}

	/* an image's payload, in the form the outbox stores it where it can be made so (`stored`) */
	auto image_payload = [&](const Image &img, bool &stored) -> Datum {
		std::optional<Datum> d = StoredPayloadFromImage(t, img);
		stored = d.has_value();
		return stored ? *d : PayloadFromImage(t, img, as);
	};
	for (const Chain *c : list) {
		/* The entity's row as one by one would leave it: absent, a row read as jsonb, or an applied image. */
		std::optional<Datum> row_json;
		bool row_stored = false; /* row_json is a stored payload (StoredPayloadFromImage), not jsonb */
		const Image *row_image = nullptr;
		if (prep[c->applied.front()].is_delete)
			row_json = before_batch[c];
		for (size_t k : c->applied) {
			const ChangeRequest &req = reqs[k];
			const PreparedChange &pc = prep[k];
			std::optional<Datum> payload;
			bool stored = false;
			if (pc.is_delete) {
				if (row_image) {
					payload = image_payload(*row_image, stored);
				} else if (row_json) {
					payload = row_json;
					stored = row_stored;
				} else {
					payload = JsonbFromText(pc.Main().raw->Json()); /* the destination never had the row */
				}
				row_image = nullptr;
				row_json.reset();
				row_stored = false;
			} else {
				row_image = &*pc.after;
				row_json.reset();
				row_stored = false;
				if (req.op != Op::Read) {
					row_json = image_payload(*row_image, row_stored); /* reused if a delete follows */
					row_image = nullptr;
					payload = row_json;
					stored = row_stored;
				}
			}
			if (req.IsSnapshot())
				continue; /* snapshot rows set state only */
			const OutboxValue ekey = OutboxEntityKey(t, pc.Main());
			queue.rows.push_back(MakeOutboxRow(t, req.source, OpName(req.op)[0], pc.version, pc.entity_key, ekey.value,
			                                   payload, k, StoredForms{ekey.stored, stored}));
		}
	}
}

} // namespace

/*
 * One segment (no truncate inside): see docs/semantics.md, "Batches".
 *   1. convert every change; 2. claim every delivery key (one statement);
 *   3. if every target allows it (SetBasedAllowed), group the changes by
 *      entity, lock the entity records (one statement per target), read the
 *      prune watermarks and decide each entity's changes in memory
 *      (Simulate); entities with a key change, a partial image, a conflict,
 *      an expired change, an applied decision for a delivery the ledger had,
 *      or a NOT NULL violation, and every entity of a segment with a target
 *      that does not allow it, are applied change by change instead
 *      (ApplyChange, with the claim already made);
 *   4. write the final entity records (insert / update, one statement per
 *      target and kind), then the rows: the final image of each entity where
 *      CollapseAllowed, else every applied image, round by round (the n-th
 *      applied change of every entity in round n);
 *   5. insert the outbox rows of the whole segment in input order (they are
 *      queued meanwhile, including those of change-by-change entities).
 */
void
ApplyEngine::ApplySegment(const std::vector<ChangeRequest> &reqs, const std::vector<size_t> &positions, size_t begin,
                          size_t end, std::vector<Outcome> &out)
{
	const size_t n = end - begin;
	std::vector<Target *> target(n);
	std::vector<PreparedChange> prep(n);
	bool set_based = true;
	for (size_t k = 0; k < n; k++) {
		const ChangeRequest &req = reqs[begin + k];
		NoteApplyProgress(); /* the worker's source keepalive, rate-limited (engine.hpp) */
		SetEventPosition(positions[begin + k]);
		Target &t = LoadTarget(req.target);
		SetContextKey(&t, req.delivery_key);
		const RunAs &as = Authorize(t);
		CheckSource(t, req);
		if (t.mapping.stream_ordered)
			RequireStreamIntake(t);
		/* values of non-key columns once the claim decided the change may apply (below) */
		prep[k] = PrepareChange(t, req, as, /* keys_only */ true);
		target[k] = &t;
		set_based = set_based && SetBasedAllowed(t);
	}
	/*
	 * Stream-ordered targets are decided by their marks, the others by claims
	 * and entity records; a segment with both kinds goes change by change, in
	 * input order, each change in its own target's way.
	 */
	size_t n_stream = 0;
	for (size_t k = 0; k < n; k++)
		n_stream += target[k]->mapping.stream_ordered ? 1 : 0;
	const bool stream = n_stream == n;
	if (n_stream > 0 && !stream) {
		for (size_t k = 0; k < n; k++) {
			SetEventPosition(positions[begin + k]);
			out[begin + k] = ApplyChangeWithClaimMade(reqs, begin + k);
		}
		return;
	}

	auto stage = [&](const std::string &what, const Target *t) {
		SetEventLabel(position_unit_ + "s " + std::to_string(positions[begin]) + " to " +
		              std::to_string(positions[end - 1]) + " " + position_scope_ + " (" + what + ")");
		SetContext(t, "");
	};
	const int32_t now_s = TransactionSeconds();
	std::vector<char> claimed(n, 1);
	/*
	 * Stream ordering: in input order, a change at or below its target's mark
	 * is a duplicate, any other moves the mark (docs/semantics.md, "Stream
	 * ordering").  No claims, no entity records, no content hashes.
	 */
	std::vector<char> fresh_change(n, 1);
	if (stream) {
		stage("deciding them by the stream marks", nullptr);
		for (size_t k = 0; k < n; k++) {
			StreamMark &m = Mark(*target[k], reqs[begin + k].source.name);
			if (StreamProcessed(prep[k].version, reqs[begin + k].IsSnapshot(), m.running)) {
				fresh_change[k] = 0;
				out[begin + k] = Outcome::Duplicate;
				counters_[target[k]->relid].duplicate++;
				continue;
			}
			if (m.running < prep[k].version)
				m.running = prep[k].version;
			m.dirty = true;
		}
	} else {
		/* claimed by offset range before the first segment (ClaimByOffsetRange), the others by digest now */
		std::vector<size_t> by_digest;
		for (size_t k = 0; k < n; k++) {
			if (claims_made_.empty() || claims_made_[begin + k] == kClaimByDigest)
				by_digest.push_back(k);
			else
				claimed[k] = claims_made_[begin + k];
		}
		if (!by_digest.empty()) {
			stage("claiming their delivery keys", nullptr);
			std::vector<char> digests = ClaimAll(target, prep, by_digest, now_s);
			for (size_t j = 0; j < by_digest.size(); j++)
				claimed[by_digest[j]] = digests[j];
		}
	}

	/* Change by change, with the batch's claim or stream decision (ApplyChange -> TakeClaim). */
	auto apply_one = [&](size_t k) {
		SetEventPosition(positions[begin + k]);
		if (deferred_outbox)
			deferred_outbox->position = k;
		if (stream)
			pending_stream_apply_ = true;
		else
			pending_claim_ = claimed[k] != 0;
		out[begin + k] = ApplyChange(reqs[begin + k]);
		pending_claim_.reset();
		pending_stream_apply_ = false;
	};
	if (!set_based) {
		for (size_t k = 0; k < n; k++)
			if (fresh_change[k])
				apply_one(k);
		return;
	}

	/*
	 * The non-key values of every change the segment may apply (a new claim,
	 * or a change newer than its stream mark) are converted now, with the
	 * errors PrepareChange would have raised; a delivery the ledger had is
	 * not converted (Simulate makes it a duplicate whatever its content, or
	 * hands its entity to ApplyChange, which converts what it applies).
	 */
	for (size_t k = 0; k < n; k++)
		if (stream ? fresh_change[k] != 0 : claimed[k] != 0) {
			const ChangeRequest &req = reqs[begin + k];
			SetEventPosition(positions[begin + k]);
			SetContextKey(target[k], req.delivery_key);
			const RunAs &as = Authorize(*target[k]);
			for (std::optional<Image> *img : {&prep[k].after, &prep[k].before})
				if (*img)
					CompleteImage(*target[k], **img, as);
		}

	/*
	 * What the decision needs per change.  The source ids are taken in input
	 * order, as one by one takes them (SourceId creates a cdc.source row on
	 * first use).
	 */
	/* none for a stream-ordered segment: its marks decided it above, nothing simulates it */
	std::vector<SimInput> sim(stream ? 0 : n);
	std::vector<int32_t> src(stream ? 0 : n);
	for (size_t k = 0; k < n && !stream; k++) {
		const Target &t = *target[k];
		sim[k].claimed = claimed[k] != 0;
		sim[k].source = t.version_col >= 0 ? std::string() : reqs[begin + k].source.name;
		/* the content hash decides nothing for a delivery the ledger had (Simulate): not computed */
		sim[k].content_hash = prep[k].is_delete ? std::string("0")
		                      : sim[k].claimed  ? ContentHash(t, prep[k].Main())
		                                        : std::string();
		sim[k].version = prep[k].version;
		sim[k].is_delete = prep[k].is_delete;
		sim[k].is_snapshot = reqs[begin + k].IsSnapshot();
		sim[k].violates_not_null = !prep[k].is_delete && ViolatesNotNull(t, *prep[k].after);
		src[k] = SourceId(sim[k].source, source_ids_);
	}

	/* The changes by entity. */
	/* hashed, not ordered: chains keep input order in `chains`, the index only finds them */
	struct EntityHash {
		size_t operator()(const std::pair<Oid, std::string> &k) const
		{
			return std::hash<std::string>()(k.second) ^ (size_t(k.first) * 0x9E3779B97F4A7C15ull);
		}
	};
	std::unordered_map<std::pair<Oid, std::string>, size_t, EntityHash> chain_index;
	chain_index.reserve(n);
	std::vector<Chain> chains;
	chains.reserve(n); /* moved at every doubling otherwise */
	std::vector<size_t> chain_of(n);
	/* known_key: EntityKey(*t, img, which) when the caller has it (PrepareChange made it for the main image) */
	/* found before anything is inserted: emplace would make (and drop) a node for every change of a known entity */
	auto chain_for = [&](Target *t, const Image &img, const char *which, const std::string *known_key) {
		std::pair<Oid, std::string> key(t->relid, known_key ? *known_key : EntityKey(*t, img, which));
		auto it = chain_index.find(key);
		if (it != chain_index.end())
			return it->second;
		chains.emplace_back();
		chains.back().t = t;
		chains.back().entity_key = key.second;
		/* the entity record's key: a stream-ordered target keeps no entity records */
		if (!stream)
			chains.back().compact_key = CompactKey(*t, img);
		chain_index.emplace(std::move(key), chains.size() - 1);
		return chains.size() - 1;
	};
	for (size_t k = 0; k < n; k++) {
		if (!fresh_change[k])
			continue;
		Target &t = *target[k];
		const ChangeRequest &req = reqs[begin + k];
		size_t c = chain_for(&t, prep[k].Main(), prep[k].is_delete ? "before" : "after", &prep[k].entity_key);
		chains[c].events.push_back(k);
		chain_of[k] = c;
		bool key_change = IsKeyChange(t, req, prep[k]);
		if (key_change)
			chains[chain_for(&t, *prep[k].before, "before", nullptr)].set_based = false;
		if (key_change || !FullImage(t, prep[k]))
			chains[c].set_based = false;
	}

	if (stream) {
		/* Every change of a chain is new (applied); a NOT NULL violation raises at its change, one by one. */
		for (Chain &c : chains) {
			if (!c.set_based || c.events.empty())
				continue;
			for (size_t k : c.events)
				if (!prep[k].is_delete && ViolatesNotNull(*c.t, *prep[k].after))
					c.set_based = false;
			if (!c.set_based)
				continue;
			c.applied = c.events;
			c.outcomes.assign(c.events.size(), Outcome::Applied);
			c.counts.applied = int64_t(c.events.size());
			for (size_t k : c.events)
				if (reqs[begin + k].IsSnapshot())
					c.counts.snapshot_rows++;
		}
	}
	/*
	 * Reads the records of `list` and decides their chains in memory:
	 * Simulate's verdict per chain.  The watermarks are read after the
	 * records (ReadWatermarks); only entities without a record consult
	 * them.
	 */
	/* the hashes as computed, before AdoptReleaseHashes matched any to a record (a second decision starts again from them) */
	std::vector<std::string> own_hash(stream ? 0 : n);
	for (size_t k = 0; k < n && !stream; k++)
		own_hash[k] = sim[k].content_hash;
	auto decide = [&](std::vector<Chain *> &list, bool lock) {
		if (stream) /* sim, src and own_hash are empty: never reached, the marks decide such a segment */
			throw std::logic_error("a stream-ordered segment has no entity records to decide by");
		FindRecords(list, source_ids_, lock);
		for (const Chain *c : list)
			for (size_t k : c->events)
				sim[k].content_hash = own_hash[k];
		std::map<std::pair<Oid, int32_t>, Version> watermarks = ReadWatermarks(list);
		for (const Chain *c : list)
			for (size_t k : c->events) {
				auto w = watermarks.find({target[k]->relid, src[k]});
				if (w != watermarks.end())
					sim[k].watermark = w->second;
				auto m = target[k]->stream_marks.find(src[k]);
				if (m != target[k]->stream_marks.end())
					sim[k].stream_mark = m->second;
			}
		AdoptReleaseHashes(list, sim, prep);
		std::vector<char> verdict;
		for (Chain *c : list)
			verdict.push_back(Simulate(*c, sim, c->t->barrier) ? 1 : 0);
		return verdict;
	};
	if (!stream) {
		/*
		 * Read the records without locking them and decide in memory; the
		 * records' updates below find out whether another transaction
		 * changed one since (docs/internals.md, "Entity records without a
		 * row lock").
		 */
		stage("reading their entity records", nullptr);
		std::vector<Chain *> decided;
		for (Chain &c : chains)
			if (c.set_based && !c.events.empty())
				decided.push_back(&c);
		std::vector<char> verdict = decide(decided, /* lock */ false);
		for (size_t i = 0; i < decided.size(); i++)
			decided[i]->set_based = verdict[i] != 0;
	}

	DeferredOutbox queue;
	deferred_outbox = &queue;
	struct ResetDeferred { /* also when an error unwinds: a plain pointer store, nothing of PostgreSQL */
		~ResetDeferred() { deferred_outbox = nullptr; }
	} reset_deferred;

	/* Change by change: entities the batch could not decide in memory. */
	for (size_t k = 0; k < n; k++)
		if (fresh_change[k] && !chains[chain_of[k]].set_based)
			apply_one(k);

	/*
	 * Entity records: new ones first, then the others.  An entity whose
	 * record another transaction created, updated or deleted since it was
	 * read is decided again with its record locked (then its write cannot
	 * be lost again, except to a record created concurrently once more).
	 */
	stage("writing their entity records", nullptr);
	std::vector<Chain *> fresh, existing;
	for (Chain &c : chains)
		if (c.set_based && !c.events.empty() && c.final_record)
			(c.stored ? existing : fresh).push_back(&c);
	for (int attempt = 0; !fresh.empty() || !existing.empty(); attempt++) {
		std::vector<Chain *> lost = InsertRecords(fresh, source_ids_, now_s);
		std::vector<Chain *> changed = UpdateRecords(existing, source_ids_, now_s);
		lost.insert(lost.end(), changed.begin(), changed.end());
		fresh.clear();
		existing.clear();
		if (lost.empty())
			break;
		if (attempt >= 3)
			throw std::runtime_error("entity records keep being created concurrently");
		stage("locking their entities", nullptr);
		std::vector<char> verdict = decide(lost, /* lock */ true);
		for (size_t i = 0; i < lost.size(); i++) {
			Chain *c = lost[i];
			if (!verdict[i]) {
				c->set_based = false;
				for (size_t k : c->events)
					apply_one(k);
			} else if (c->final_record) {
				(c->stored ? existing : fresh).push_back(c);
			}
		}
		stage("writing their entity records", nullptr);
	}

	/*
	 * The after-images of the entities decided in memory are converted and
	 * nothing reads them as received any more (their conflicts and dead
	 * letters went change by change): their texts go before the rows are
	 * written.
	 */
	size_t released = 0;
	for (const Chain &c : chains)
		if (c.set_based)
			for (size_t k : c.events)
				if (!prep[k].is_delete && reqs[begin + k].after)
					released += reqs[begin + k].after->Release();
	TrimFreedMemory(released);

	/*
	 * Rows: per target, the final image of each entity, or round by round.
	 * A row expected to be new is inserted without looking its key up
	 * first (RowExpectedAbsent; UpsertRowsDirect, "absent"): on the
	 * worker's stream, whose op c is a source INSERT, from the ops; for
	 * cdc_apply_batch(), whose producers may send op c for rows the
	 * destination has, from the entity records read above (every target
	 * there is entity-ordered: RequireStreamIntake).
	 */
	std::vector<RowEffect> effects(n, RowEffect::Other);
	for (size_t k = 0; k < n; k++)
		if (prep[k].is_delete)
			effects[k] = RowEffect::Delete;
		else if (stream_intake_ && reqs[begin + k].op == Op::Create)
			effects[k] = RowEffect::Create;
	/*
	 * Not where the target keeps a stream mark (stream -> entity ordering):
	 * the mark is the implicit record of every key without one, whose row
	 * the worker may have written (docs/semantics.md, "Stream ordering").
	 */
	if (!stream_intake_)
		for (const Chain &c : chains)
			if (c.t->stream_marks.empty())
				MarkCreateFromRecord(c, effects);
	std::map<Oid, std::vector<const Chain *>> by_target;
	for (const Chain &c : chains)
		if (c.set_based && !c.applied.empty()) {
			std::vector<const Chain *> &list = by_target[c.t->relid];
			if (list.empty())
				list.reserve(chains.size()); /* grown from nothing per segment otherwise (issue 13) */
			list.push_back(&c);
		}
	for (const auto &[relid, list] : by_target) {
		const Target &t = *list.front()->t;
		stage("writing their rows", &t);
		const bool collapse = CollapseAllowed(t);
		const bool outbox = t.mapping.outbox;
		if (collapse && outbox) {
			WriteMergedWithOutbox(t, list, prep, &reqs[begin], queue, Authorize(t), effects);
			continue;
		}
		for (size_t round = 0;; round++) {
			std::vector<std::pair<size_t, const Chain *>> writes;
			std::vector<char> absent;
			for (const Chain *c : list)
				if (std::optional<size_t> k = RoundWrite(*c, collapse, round)) {
					writes.emplace_back(*k, c);
					absent.push_back(RowExpectedAbsent(*c, collapse, round, effects) ? 1 : 0);
				}
			if (writes.empty())
				break;
			std::vector<std::optional<Datum>> rows = WriteRows(t, writes, prep, outbox ? Returning::All : Returning::None,
			                                                   Authorize(t), absent);
			if (!outbox)
				continue;
			for (size_t i = 0; i < writes.size(); i++) {
				const size_t k = writes[i].first;
				const ChangeRequest &req = reqs[begin + k];
				if (req.IsSnapshot())
					continue; /* snapshot rows set state only */
				std::optional<Datum> row = rows[i];
				if (prep[k].is_delete && !row)
					row = JsonbFromText(prep[k].Main().raw->Json()); /* the destination never had the row: publish the before-image */
				const OutboxValue ekey = OutboxEntityKey(t, prep[k].Main());
				queue.rows.push_back(MakeOutboxRow(t, req.source, OpName(req.op)[0], prep[k].version,
				                                   prep[k].entity_key, ekey.value, row, k, StoredForms{ekey.stored, false}));
			}
		}
	}

	/* Outcomes and counts of the entities decided in memory; the outbox rows, in input order. */
	for (const Chain &c : chains) {
		if (!c.set_based || c.events.empty())
			continue;
		AddCounts(counters_[c.t->relid], c.counts);
		for (size_t j = 0; j < c.events.size(); j++)
			out[begin + c.events[j]] = c.outcomes[j];
	}
	/*
	 * The rows are written and the payloads built: the converted values and
	 * the images as received (whose JSON served conflicts and the payloads
	 * of deletes that found no row) are not held while the outbox rows go
	 * in (docs/benchmarks.md, "Memory per event").
	 */
	released = 0;
	for (size_t k = 0; k < n; k++) {
		if (prep[k].after)
			released += ReleaseValues(*target[k], *prep[k].after);
		if (reqs[begin + k].after)
			released += reqs[begin + k].after->Release();
	}
	TrimFreedMemory(released);
	stage("writing their outbox rows", nullptr);
	deferred_outbox = nullptr;
	FlushOutbox(queue, counters_);
}

} // namespace cdc::pg
