// Outbox rows: see outbox.hpp and docs/outbox.md.
//
// Glue, C++ regime: statements through SPI (pg/spi.hpp) in the caller's
// transaction.  Must not decide anything: whether a change is applied (and
// so owes a row) is decided by single.cpp and segment.cpp.
#include "pg/apply/outbox.hpp"

#include "core/layout.hpp"
#include "core/errors.hpp"
#include "pg/apply/internal.hpp"
#include "pg/apply/target.hpp"
#include "pg/spi.hpp"

extern "C" {
#include "catalog/pg_type.h"
}

#include <algorithm>

namespace cdc::pg {

std::string
SourceJson(const SourceInfo &src, const Version &v)
{
	std::string s = "{\"name\": ";
	AppendJsonString(s, src.name);
	s += ", \"db\": ";
	AppendJsonString(s, src.db);
	s += ", \"schema\": ";
	AppendJsonString(s, src.schema);
	s += ", \"table\": ";
	AppendJsonString(s, src.table);
	s += ", \"lsn\": " + (src.lsn ? std::to_string(*src.lsn) : std::string("null"));
	s += ", \"commit_lsn\": " + (src.commit_lsn ? std::to_string(*src.commit_lsn) : std::string("null"));
	s += ", \"txId\": " + (src.tx_id ? std::to_string(*src.tx_id) : std::string("null"));
	s += ", \"version\": [";
	for (size_t i = 0; i < v.parts.size(); i++)
		s += (i ? ", " : "") + std::to_string(v.parts[i]);
	s += "]}";
	return s;
}

namespace {

// The outbox idempotency key: md5 of the source identity of the change
// (source id, source table, op, version, entity key) — never of the
// delivery key, so a re-published change gets the same key (docs/outbox.md).
std::string
IdempotencyKey(const Target &t, const SourceInfo &src, char op, const Version &v, const std::string &entity_key)
{
	std::string table = src.table.empty() ? t.display : src.schema + "." + src.table;
	std::string s = src.name + "\n" + table + "\n" + std::string(1, op) + "\n" + v.ToArrayLiteral() + "\n" + entity_key;
	return Md5Hex(s);
}

} // namespace

DeferredOutbox *deferred_outbox = nullptr;

OutboxRow
MakeOutboxRow(const Target &t, const SourceInfo &src, char op, const Version &v, const std::string &entity_key,
              const std::optional<std::string> &payload, size_t position)
{
	OutboxRow r;
	r.position = position;
	r.target = t.relid;
	r.idempotency_key = IdempotencyKey(t, src, op, v, entity_key);
	r.topic = t.mapping.topic ? t.mapping.topic : std::optional<std::string>(t.display);
	r.entity_key = entity_key.empty() ? std::nullopt : std::optional<std::string>(entity_key);
	r.op = std::string(1, op);
	r.payload = payload;
	r.source = SourceJson(src, v);
	r.version = v.ToArrayLiteral();
	return r;
}

// Writes the outbox row of an applied change (ON CONFLICT DO NOTHING: a
// replay never adds a second one; the key is unique per target, so no other
// target's writer can take it, docs/security.md).  Returns whether a row was inserted.
// Inside a batch the row is queued instead (and counted when the batch
// inserts it): false.
bool
WriteOutbox(const Target &t, const SourceInfo &src, char op, const Version &v, const std::string &entity_key,
            const std::optional<std::string> &payload)
{
	if (deferred_outbox != nullptr) {
		deferred_outbox->rows.push_back(MakeOutboxRow(t, src, op, v, entity_key, payload, deferred_outbox->position));
		return false;
	}
	Params p;
	p.AddText(IdempotencyKey(t, src, op, v, entity_key));
	p.AddTextOrNull(t.mapping.topic ? t.mapping.topic : std::optional<std::string>(t.display));
	p.AddOid(t.relid);
	p.AddTextOrNull(entity_key.empty() ? std::nullopt : std::optional<std::string>(entity_key));
	p.AddText(std::string(1, op));
	p.AddTextOrNull(payload);
	p.AddText(SourceJson(src, v));
	p.AddText(v.ToArrayLiteral());
	uint64_t n = Execute("INSERT INTO cdc.outbox (idempotency_key, topic, target, entity_key, op, payload, source, version) "
	                     "VALUES ($1, $2, $3, $4::pg_catalog.jsonb, $5, $6::pg_catalog.jsonb, $7::pg_catalog.jsonb, "
	                     "$8::pg_catalog.int8[]) "
	                     "ON CONFLICT (idempotency_key, target) DO NOTHING",
	                     p, true);
	return n == 1;
}

// Inserts the queued outbox rows in input order (one statement) and counts
// the inserted ones per target.
void
FlushOutbox(DeferredOutbox &q, std::map<Oid, Counters> &counters)
{
	if (q.rows.empty())
		return;
	std::stable_sort(q.rows.begin(), q.rows.end(),
	                 [](const OutboxRow &a, const OutboxRow &b) { return a.position < b.position; });
	ArrayParam ikeys = ArrayParam::Text(), topics = ArrayParam::Text(), ekeys = ArrayParam::Text(),
	           ops = ArrayParam::Text(), payloads = ArrayParam::Text(), sources = ArrayParam::Text(),
	           versions = ArrayParam::Text();
	ArrayParam targets(OIDOID, sizeof(Oid), true, TYPALIGN_INT);
	for (const OutboxRow &r : q.rows) {
		ikeys.AddText(r.idempotency_key);
		topics.AddTextOrNull(r.topic);
		targets.Add(ObjectIdGetDatum(r.target), false);
		ekeys.AddTextOrNull(r.entity_key);
		ops.AddText(r.op);
		payloads.AddTextOrNull(r.payload);
		sources.AddText(r.source);
		versions.AddText(r.version);
	}
	Params p;
	ikeys.AddTo(p, TEXTARRAYOID);
	topics.AddTo(p, TEXTARRAYOID);
	targets.AddTo(p, OIDARRAYOID);
	ekeys.AddTo(p, TEXTARRAYOID);
	ops.AddTo(p, TEXTARRAYOID);
	payloads.AddTo(p, TEXTARRAYOID);
	sources.AddTo(p, TEXTARRAYOID);
	versions.AddTo(p, TEXTARRAYOID);
	uint64_t n = Execute("INSERT INTO cdc.outbox (idempotency_key, topic, target, entity_key, op, payload, source, version) "
	                     "SELECT x.i, x.tp, x.t::pg_catalog.regclass, x.e::pg_catalog.jsonb, x.o, x.p::pg_catalog.jsonb, "
	                     "x.s::pg_catalog.jsonb, x.v::pg_catalog.int8[] "
	                     "FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3), "
	                     "pg_catalog.unnest($4), pg_catalog.unnest($5), pg_catalog.unnest($6), pg_catalog.unnest($7), "
	                     "pg_catalog.unnest($8)) WITH ORDINALITY AS x(i, tp, t, e, o, p, s, v, ord) "
	                     "ORDER BY x.ord ON CONFLICT (idempotency_key, target) DO NOTHING RETURNING target::pg_catalog.oid",
	                     p, true);
	for (uint64_t i = 0; i < n; i++)
		counters[Oid(std::stoul(ResultText(i, 1).value_or("0")))].outbox_rows++;
	q.rows.clear();
}

} // namespace cdc::pg
