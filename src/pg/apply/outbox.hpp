// Outbox rows (docs/outbox.md): one row in cdc.outbox per applied change of
// a target whose mapping has outbox => true, with its idempotency key (from
// the change's source identity, never the delivery key), topic, entity key,
// payload (the row after the change, or the removed row) and source JSON.
// Change by change a row is inserted at once (WriteOutbox); inside a batch
// segment rows are queued in deferred_outbox and inserted in input order by
// one statement (FlushOutbox).
//
// Internal to src/pg/apply/.  C++ regime.  deferred_outbox is a plain
// pointer (no C++ global with a destructor), set only while a segment runs.
#pragma once

#include "core/envelope.hpp"
#include "core/version.hpp"
#include "pg/apply/engine.hpp"
#include "pg/apply/target.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cdc::pg {

// The "source" JSON of outbox rows, history rows and handler metadata.
std::string SourceJson(const SourceInfo &src, const Version &v);

// An outbox row held back by a batch, inserted with the batch's other outbox
// rows in input order (FlushOutbox).
struct OutboxRow {
	size_t position; // input position of the event: rows are inserted in this order
	Oid target;
	std::string idempotency_key;
	std::optional<std::string> topic, entity_key, payload;
	std::string op, source, version;
};
struct DeferredOutbox {
	std::vector<OutboxRow> rows;
	size_t position = 0; // of the event being applied
};
// Set while a batch segment runs (a plain pointer: no C++ global with a
// destructor); reset by every ApplyEngine.
extern DeferredOutbox *deferred_outbox;

// The outbox row of an applied change, for the batch's queue.
OutboxRow MakeOutboxRow(const Target &t, const SourceInfo &src, char op, const Version &v,
                        const std::string &entity_key, const std::optional<std::string> &payload, size_t position);
// Writes (or, inside a segment, queues) the outbox row of an applied change;
// true when a row was inserted.
bool WriteOutbox(const Target &t, const SourceInfo &src, char op, const Version &v, const std::string &entity_key,
                 const std::optional<std::string> &payload);
// Inserts the queued rows in input order and counts them per target.
void FlushOutbox(DeferredOutbox &q, std::map<Oid, Counters> &counters);

} // namespace cdc::pg
