// Compact bookkeeping tables: see state_store.hpp.
#include "pg/apply/state_store.hpp"

#include "core/errors.hpp"
#include "core/json.hpp"
#include "core/layout.hpp"
#include "core/offset_claims.hpp"
#include "pg/apply/internal.hpp"
#include "core/errors.hpp"
#include "pg/apply/id_cache.hpp"
#include "pg/apply/state_direct.hpp"
#include "pg/spi.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_type.h"
}

#include <algorithm>
#include <cstdint>
#include <stdexcept>

namespace cdc::pg {

namespace {

void
AddVersion(Params &p, const Version &v)
{
	StoredVersion s = ToStoredVersion(v);
	p.Add(INT4OID, Int32GetDatum(s.v0), false);
	p.AddInt8(s.v1);
	p.AddInt8(s.v2);
	p.Add(INT4OID, Int32GetDatum(s.v3), false);
}

} // namespace

int32_t
TransactionSeconds()
{
	TimestampTz ts = PgCall([]() { return GetCurrentTransactionStartTimestamp(); });
	return CoarseSeconds(int64_t(ts));
}

int32_t
SourceId(const std::string &name, std::map<std::string, int32_t> &cache)
{
	auto it = cache.find(name);
	if (it != cache.end())
		return it->second;
	if (std::optional<int32_t> id = CachedId(Dictionary::Source, name)) {
		cache[name] = *id;
		return *id;
	}
	Params p;
	p.AddText(name);
	uint64_t n = Execute("SELECT id FROM cdc.source WHERE name OPERATOR(pg_catalog.=) $1", p, true);
	if (n > 0) {
		int32_t id = int32_t(std::stol(ResultText(0, 1).value_or("0")));
		cache[name] = id;
		RememberId(Dictionary::Source, name, id);
		return id;
	}
	/*
	 * Insert (id, name) with the id the name's hash gives.  Nothing happens
	 * when either is taken: the name by a concurrent transaction (a new
	 * statement, a new snapshot, then sees its row), the id by another name
	 * (then the next id).  A concurrent uncommitted insert of the same id or
	 * name makes the insert wait for its end.  No sequence: a rolled-back
	 * call leaves no trace.
	 */
	const std::string hex = Md5Hex(name);
	for (uint32_t collisions = 0; collisions < 1000; collisions++) {
		Params q;
		q.Add(INT4OID, Int32GetDatum(SourceIdCandidate(hex, collisions)), false);
		q.AddText(name);
		n = Execute("INSERT INTO cdc.source (id, name) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING id", q, true);
		if (n == 0)
			n = Execute("SELECT id FROM cdc.source WHERE name OPERATOR(pg_catalog.=) $1", p, true);
		if (n > 0) {
			int32_t id = int32_t(std::stol(ResultText(0, 1).value_or("0")));
			cache[name] = id;
			RememberId(Dictionary::Source, name, id);
			return id;
		}
	}
	throw InputError("54000", "no free id for source name " + QuotedField(ClippedForMessage(name)) + " in cdc.source", {},
	                 "1,000 ids after its hash are taken by other names.");
}

int64_t
LedgerDigest(Oid target, const std::string &delivery_key)
{
	unsigned char sum[16];
	Md5Binary(LedgerDigestInput(uint32_t(target), delivery_key), sum);
	return Int64FromMd5(sum);
}

bool
ClaimDelivery(Oid target, const std::string &delivery_key, int32_t now_s)
{
	const int64_t digest = LedgerDigest(target, delivery_key);
	int direct = PgCallAs(RunAs::ExtensionOwner(), [&]() { return ClaimDeliveryDirectPg(digest, target, now_s); });
	if (direct != kNotDirect)
		return direct == 1;
	Params p;
	p.AddInt8(digest);
	p.AddOid(target);
	p.Add(INT4OID, Int32GetDatum(now_s), false);
	uint64_t n = Execute("INSERT INTO cdc.ledger (digest, target, claimed_s) VALUES ($1, $2, $3) "
	                     "ON CONFLICT (digest) DO NOTHING",
	                     p, true);
	return n == 1;
}

namespace {

// The id of the (target, partition) row of cdc.ledger_partition, updated (or
// created) so that a concurrent batch of the same partition and target
// waits for this transaction (ClaimOffsetRanges).
int64_t
LockLedgerPartition(Oid target, const std::string &partition, int32_t now_s)
{
	for (int attempt = 0; attempt < 3; attempt++) {
		Params p;
		p.AddOid(target);
		p.AddText(partition);
		p.Add(INT4OID, Int32GetDatum(now_s), false);
		if (Execute("UPDATE cdc.ledger_partition SET claimed_s = $3 "
		            "WHERE target OPERATOR(pg_catalog.=) $1 AND name OPERATOR(pg_catalog.=) $2 RETURNING id",
		            p, true) == 1)
			return ResultInt(0, 1).value_or(0);
		/* none yet: create it; a concurrent creator's row is updated on the next attempt */
		if (Execute("INSERT INTO cdc.ledger_partition (target, name, claimed_s) VALUES ($1, $2, $3) "
		            "ON CONFLICT (target, name) DO NOTHING RETURNING id",
		            p, true) == 1)
			return ResultInt(0, 1).value_or(0);
	}
	throw std::runtime_error("cdc.ledger_partition: no row for the partition after three attempts");
}

} // namespace

std::vector<char>
ClaimOffsetRanges(const std::string &partition, const std::vector<Oid> &target, const std::vector<int64_t> &offsets,
                  int32_t now_s)
{
	std::vector<Oid> targets(target);
	std::sort(targets.begin(), targets.end()); /* locks in one order: two multi-target batches cannot deadlock */
	targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
	std::vector<size_t> group(target.size());
	for (size_t k = 0; k < target.size(); k++)
		group[k] = size_t(std::lower_bound(targets.begin(), targets.end(), target[k]) - targets.begin());

	/* each target's first and last offset: the ranges that may overlap its changes */
	std::vector<int64_t> first(targets.size(), INT64_MAX), last(targets.size(), INT64_MIN);
	for (size_t k = 0; k < target.size(); k++) {
		first[group[k]] = std::min(first[group[k]], offsets[k]);
		last[group[k]] = std::max(last[group[k]], offsets[k]);
	}
	std::vector<int64_t> partition_id(targets.size());
	std::vector<std::vector<cdc::OffsetRange>> existing(targets.size());
	for (size_t g = 0; g < targets.size(); g++) {
		partition_id[g] = LockLedgerPartition(targets[g], partition, now_s);
		Params p;
		p.AddInt8(partition_id[g]);
		p.AddInt8(first[g]);
		p.AddInt8(last[g]);
		uint64_t n = Execute("SELECT lo, hi FROM cdc.ledger_range WHERE partition_id OPERATOR(pg_catalog.=) $1 "
		                     "AND hi OPERATOR(pg_catalog.>=) $2 AND lo OPERATOR(pg_catalog.<=) $3",
		                     p, true);
		for (uint64_t i = 0; i < n; i++)
			existing[g].push_back(cdc::OffsetRange{ResultInt(i, 1).value_or(0), ResultInt(i, 2).value_or(0)});
	}

	cdc::OffsetClaimPlan plan = cdc::PlanOffsetClaims(offsets, group, std::move(existing));
	if (!plan.ranges.empty()) {
		ArrayParam ids(INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
		ArrayParam los(INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
		ArrayParam his(INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
		for (const cdc::NewOffsetRange &r : plan.ranges) {
			ids.Add(Int64GetDatum(partition_id[r.group]), false);
			los.Add(Int64GetDatum(r.range.lo), false);
			his.Add(Int64GetDatum(r.range.hi), false);
		}
		Params p;
		ids.AddTo(p, INT8ARRAYOID);
		los.AddTo(p, INT8ARRAYOID);
		his.AddTo(p, INT8ARRAYOID);
		p.Add(INT4OID, Int32GetDatum(now_s), false);
		Execute("INSERT INTO cdc.ledger_range (partition_id, lo, hi, claimed_s) "
		        "SELECT x.p, x.lo, x.hi, $4 FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), "
		        "pg_catalog.unnest($3)) AS x(p, lo, hi)",
		        p, true);
	}
	return std::move(plan.claimed);
}

bool
DeliveryHadConflict(Oid target, const std::string &delivery_key)
{
	Params p;
	p.AddOid(target);
	p.AddText(delivery_key);
	return Execute("SELECT 1 FROM cdc.conflicts WHERE target OPERATOR(pg_catalog.=) $1 "
	               "AND delivery_key OPERATOR(pg_catalog.=) $2 LIMIT 1", p, true) > 0;
}

std::optional<std::string>
SourceNameOf(int32_t id, const std::map<std::string, int32_t> &known)
{
	for (const auto &[name, known_id] : known)
		if (known_id == id)
			return name;
	Params p;
	p.Add(INT4OID, Int32GetDatum(id), false);
	if (Execute("SELECT name FROM cdc.source WHERE id OPERATOR(pg_catalog.=) $1", p, true) == 0)
		return std::nullopt;
	return ResultText(0, 1);
}

EntityRecord
EntityRecordFromResult(uint64_t row, int first, size_t arity)
{
	EntityRecord r;
	StoredVersion s;
	s.v0 = int32_t(ResultInt(row, first).value_or(0));
	s.v1 = ResultInt(row, first + 1).value_or(0);
	s.v2 = ResultInt(row, first + 2).value_or(0);
	s.v3 = int32_t(ResultInt(row, first + 3).value_or(0));
	r.version = FromStoredVersion(s, arity);
	r.deleted = ResultBool(row, first + 4);
	if (std::optional<int64_t> h = ResultInt(row, first + 5))
		r.content_hash = std::to_string(*h); /* as ContentHash writes it */
	return r;
}

EntityRow
EntityRowOf(int32_t src, const Version &v, bool deleted, const std::string &content_hash, int32_t now_s)
{
	EntityRow row{};
	StoredVersion sv = ToStoredVersion(v);
	row.src = src;
	row.v0 = sv.v0;
	row.v1 = sv.v1;
	row.v2 = sv.v2;
	row.v3 = sv.v3;
	row.deleted = deleted;
	row.chash = int32_t(std::stol(content_hash));
	row.touched_s = now_s;
	return row;
}

EntityRecord
EntityRecordOfRow(const EntityRow &row, size_t arity)
{
	EntityRecord r;
	r.version = FromStoredVersion(StoredVersion{row.v0, row.v1, row.v2, row.v3}, arity);
	r.deleted = row.deleted;
	r.content_hash = std::to_string(row.chash); /* as EntityRecordFromResult reads it */
	return r;
}

std::optional<EntityRecord>
LockEntityRecord(Oid target, const std::string &key, size_t arity, const std::map<std::string, int32_t> &known,
                 EntityLocation *loc, bool lock)
{
	*loc = EntityLocation{};
	EntityRow row{};
	int direct = PgCallAs(RunAs::ExtensionOwner(), [&]() {
		return FindEntityRecordDirectPg(target, key.data(), int(key.size()), &row, loc, lock);
	});
	if (direct == 0)
		return std::nullopt;
	if (direct == 1) {
		EntityRecord r = EntityRecordOfRow(row, arity);
		std::optional<std::string> name = SourceNameOf(row.src, known);
		if (!name)
			return std::nullopt; /* as below */
		r.source = std::move(*name);
		return r;
	}
	Params p;
	p.AddOid(target);
	p.AddText(key);
	/* the source's name is looked up only when it is not one the caller knows (SourceNameOf) */
	uint64_t n = Execute("SELECT e.src, e.v0, e.v1, e.v2, e.v3, e.deleted, e.chash "
	                     "FROM cdc.entity_state e "
	                     "WHERE e.target OPERATOR(pg_catalog.=) $1 AND e.key OPERATOR(pg_catalog.=) $2 FOR UPDATE OF e",
	                     p, true);
	if (n == 0)
		return std::nullopt;
	const int32_t src = int32_t(ResultInt(0, 1).value_or(0));
	EntityRecord r = EntityRecordFromResult(0, 2, arity);
	std::optional<std::string> name = SourceNameOf(src, known);
	if (!name)
		return std::nullopt; /* as the join with cdc.source did: a record of no source is no record */
	r.source = std::move(*name);
	return r;
}

bool
WriteEntityRecord(Oid target, const std::string &key, int32_t src, const Version &v, bool deleted,
                  const std::string &content_hash, int32_t now_s, bool existed, const EntityLocation &loc)
{
	EntityRow row = EntityRowOf(src, v, deleted, content_hash, now_s);
	const bool unlocked = existed && loc.valid && !loc.locked;
	int direct = PgCallAs(RunAs::ExtensionOwner(), [&]() {
		return existed ? UpdateEntityRecordDirectPg(&loc, target, key.data(), int(key.size()), &row)
		               : InsertEntityRecordDirectPg(target, key.data(), int(key.size()), &row);
	});
	if (direct != kNotDirect)
		return direct == 1;
	if (unlocked)
		return false; /* the statement would write over a concurrent change: the caller locks it first */
	Params p;
	p.AddOid(target);
	p.AddText(key);
	p.Add(INT4OID, Int32GetDatum(src), false);
	AddVersion(p, v);
	p.AddBool(deleted);
	p.Add(INT4OID, Int32GetDatum(int32_t(std::stol(content_hash))), false);
	p.Add(INT4OID, Int32GetDatum(now_s), false);
	if (existed) {
		Execute("UPDATE cdc.entity_state SET src = $3, v0 = $4, v1 = $5, v2 = $6, v3 = $7, deleted = $8, "
		        "chash = $9, touched_s = $10 WHERE target OPERATOR(pg_catalog.=) $1 AND key OPERATOR(pg_catalog.=) $2",
		        p, true);
		return true;
	}
	uint64_t n = Execute("INSERT INTO cdc.entity_state (target, key, src, v0, v1, v2, v3, deleted, chash, touched_s) "
	                     "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (target, key) DO NOTHING",
	                     p, true);
	return n == 1;
}

std::optional<Version>
ReadWatermark(Oid target, int32_t src, size_t arity)
{
	StoredVersion d;
	int direct =
		PgCallAs(RunAs::ExtensionOwner(), [&]() { return ReadWatermarkDirectPg(target, src, &d.v0, &d.v1, &d.v2, &d.v3); });
	if (direct == 0)
		return std::nullopt;
	if (direct == 1)
		return FromStoredVersion(d, arity);
	Params p;
	p.AddOid(target);
	p.Add(INT4OID, Int32GetDatum(src), false);
	uint64_t n = Execute("SELECT v0, v1, v2, v3 FROM cdc.prune_watermark "
	                     "WHERE target OPERATOR(pg_catalog.=) $1 AND src OPERATOR(pg_catalog.=) $2", p, true);
	if (n == 0)
		return std::nullopt;
	StoredVersion s;
	s.v0 = std::stoi(ResultText(0, 1).value_or("0"));
	s.v1 = std::stoll(ResultText(0, 2).value_or("0"));
	s.v2 = std::stoll(ResultText(0, 3).value_or("0"));
	s.v3 = std::stoi(ResultText(0, 4).value_or("0"));
	return FromStoredVersion(s, arity);
}

void
RecordDeadLetter(Oid target, const std::string &entity_key, const std::string &delivery_key, char op,
                 const Version &v, const Version &watermark, const std::string &image_json,
                 const std::string &source_json)
{
	Params p;
	p.AddOid(target);
	p.AddText(entity_key);
	p.AddText(delivery_key);
	p.AddText(std::string(1, op));
	p.AddText(v.ToArrayLiteral());
	p.AddText(watermark.ToArrayLiteral());
	p.AddText(image_json);
	p.AddText(source_json);
	Execute("INSERT INTO cdc.dead_letter (target, entity_key, delivery_key, op, version, watermark, event_image, source) "
	        "VALUES ($1, $2::pg_catalog.jsonb, $3, $4, $5::pg_catalog.int8[], $6::pg_catalog.int8[], $7::pg_catalog.jsonb, "
	        "$8::pg_catalog.jsonb)",
	        p, true);
}

std::string
LiveKeysNewerThan(Oid target, int32_t src, const Version &v)
{
	Params p;
	p.AddOid(target);
	p.Add(INT4OID, Int32GetDatum(src), false);
	AddVersion(p, v);
	uint64_t n = Execute("SELECT coalesce(pg_catalog.array_agg(key), '{}')::pg_catalog.text FROM cdc.entity_state "
	                     "WHERE target OPERATOR(pg_catalog.=) $1 AND src OPERATOR(pg_catalog.=) $2 "
	                     "AND (v0, v1, v2, v3) OPERATOR(pg_catalog.>) ($3, $4, $5, $6) AND NOT deleted",
	                     p, true);
	return n ? ResultText(0, 1).value_or("{}") : "{}";
}

std::vector<std::vector<std::string>>
LiveKeysOlderThan(Oid target, int32_t src, size_t nkey, const Version &v)
{
	Params p;
	p.AddOid(target);
	p.Add(INT4OID, Int32GetDatum(src), false);
	AddVersion(p, v);
	/* the compact key: the text of a single key column, else a text[] literal (core/layout.hpp) */
	std::string cols;
	for (size_t i = 1; i <= nkey; i++)
		cols += (i > 1 ? ", " : "") + (nkey == 1 ? std::string("e.key") : "(e.key::pg_catalog.text[])[" + std::to_string(i) + "]");
	/* ordered by the table's column (each element of a split key is also called "key") */
	uint64_t n = Execute("SELECT " + cols + " FROM cdc.entity_state e "
	                     "WHERE e.target OPERATOR(pg_catalog.=) $1 AND e.src OPERATOR(pg_catalog.=) $2 "
	                     "AND (e.v0, e.v1, e.v2, e.v3) OPERATOR(pg_catalog.<) ($3, $4, $5, $6) AND NOT e.deleted "
	                     "ORDER BY e.key",
	                     p, true);
	std::vector<std::vector<std::string>> keys(n);
	for (uint64_t r = 0; r < n; r++)
		for (size_t i = 1; i <= nkey; i++)
			keys[r].push_back(ResultText(r, int(i)).value_or(""));
	return keys;
}

void
DropEntityRecordsUpTo(Oid target, int32_t src, const Version &v)
{
	Params p;
	p.AddOid(target);
	p.Add(INT4OID, Int32GetDatum(src), false);
	AddVersion(p, v);
	Execute("DELETE FROM cdc.entity_state WHERE target OPERATOR(pg_catalog.=) $1 AND src OPERATOR(pg_catalog.=) $2 "
	        "AND (v0, v1, v2, v3) OPERATOR(pg_catalog.<=) ($3, $4, $5, $6)",
	        p, true);
}

namespace {

Version
ResultVersion(uint64_t row, int first_col)
{
	StoredVersion sv;
	sv.v0 = std::stoi(ResultText(row, first_col).value_or("0"));
	sv.v1 = std::stoll(ResultText(row, first_col + 1).value_or("0"));
	sv.v2 = std::stoll(ResultText(row, first_col + 2).value_or("0"));
	sv.v3 = std::stoi(ResultText(row, first_col + 3).value_or("0"));
	return FromStoredVersion(sv, 4);
}

} // namespace

void
CheckStreamScope(Oid target, const std::string &display, const std::string &source)
{
	Params p;
	p.AddOid(target);
	p.AddText(source);
	if (Execute("SELECT c.subscription_a, c.subscription_b FROM cdc._stream_scope_conflict($1, $2) c", p, true) == 0)
		return;
	const std::string a = ResultText(0, 1).value_or(""), b = ResultText(0, 2).value_or("");
	throw InputError("55000",
	                 "table " + display + " is stream-ordered and fed by subscriptions \"" + a + "\" and \"" + b +
	                     "\" of source \"" + source + "\" with different publications",
	                 "Its one stream mark per source orders the changes of several subscriptions only when they "
	                 "receive the same changes; otherwise a change one of them delivers late counts as a duplicate "
	                 "(docs/semantics.md, \"Stream ordering\").",
	                 "Use one subscription per stream-ordered target, or the same publications for all of them, or "
	                 "entity ordering (cdc.set_ordering(target, 'entity')).");
}

Version
LockStreamMark(Oid target, int32_t src, const std::string &display, const std::string &source)
{
	Params p;
	p.AddOid(target);
	p.Add(INT4OID, Int32GetDatum(src), false);
	uint64_t other = Execute("SELECT s.name FROM cdc.stream_mark m JOIN cdc.source s ON s.id OPERATOR(pg_catalog.=) m.src "
	                         "WHERE m.target OPERATOR(pg_catalog.=) $1 AND m.src OPERATOR(pg_catalog.<>) $2 LIMIT 1",
	                         p, true);
	if (other > 0)
		throw InputError("55000",
		                 "table " + display + " is stream-ordered and fed by source \"" + ResultText(0, 1).value_or("") +
		                     "\": a change of source \"" + source + "\" is refused",
		                 "A stream-ordered target is written by one ordered stream only (docs/semantics.md, \"Stream "
		                 "ordering\").",
		                 "Switch the target to entity ordering with cdc.set_ordering(target, 'entity') to let several "
		                 "sources write it; a new source cluster needs a fresh copy of the table.");
	const std::string lock = "SELECT v0, v1, v2, v3 FROM cdc.stream_mark "
	                         "WHERE target OPERATOR(pg_catalog.=) $1 AND src OPERATOR(pg_catalog.=) $2 FOR UPDATE";
	uint64_t n = Execute(lock, p, true);
	if (n == 0) {
		Params q;
		q.AddOid(target);
		q.Add(INT4OID, Int32GetDatum(src), false);
		q.Add(INT4OID, Int32GetDatum(TransactionSeconds()), false);
		/* a concurrent creator wins: ON CONFLICT waits for it, and the lock below (a new snapshot) finds its row */
		Execute("INSERT INTO cdc.stream_mark (target, src, v0, v1, v2, v3, updated_s) VALUES ($1, $2, 0, 0, 0, 0, $3) "
		        "ON CONFLICT (target, src) DO NOTHING",
		        q, true);
		n = Execute(lock, p, true);
		if (n == 0)
			throw std::runtime_error("the stream mark of table " + display + " could not be created");
	}
	return ResultVersion(0, 1);
}

void
WriteStreamMark(Oid target, int32_t src, const Version &v, int32_t now_s)
{
	Params p;
	p.AddOid(target);
	p.Add(INT4OID, Int32GetDatum(src), false);
	AddVersion(p, v);
	p.Add(INT4OID, Int32GetDatum(now_s), false);
	Execute("UPDATE cdc.stream_mark SET v0 = $3, v1 = $4, v2 = $5, v3 = $6, updated_s = $7 "
	        "WHERE target OPERATOR(pg_catalog.=) $1 AND src OPERATOR(pg_catalog.=) $2",
	        p, true);
}

std::map<int32_t, Version>
ReadStreamMarks(Oid target)
{
	Params p;
	p.AddOid(target);
	uint64_t n = Execute("SELECT src, v0, v1, v2, v3 FROM cdc.stream_mark WHERE target OPERATOR(pg_catalog.=) $1", p, true);
	std::map<int32_t, Version> out;
	for (uint64_t i = 0; i < n; i++)
		out[int32_t(std::stoi(ResultText(i, 1).value_or("0")))] = ResultVersion(i, 2);
	return out;
}

} // namespace cdc::pg
