// Outbox rows (docs/semantics.md, "Outbox"): one row per applied change of
// a target whose mapping has outbox => true, stored compactly in
// cdc.outbox_rows (the view cdc.outbox shows the documented shape): the
// binary idempotency key (from the change's source identity, never the
// delivery key), the version and source positions as columns, the topic and
// the constant source identity as a cdc.outbox_source id, the entity key
// and the payload as jsonb Datums (the row after the change, or the removed
// row).  Change by change a row is inserted at once (WriteOutbox); inside a
// batch segment rows are queued in deferred_outbox and inserted in input
// order by one statement (FlushOutbox).  A mapping with outbox_via =>
// 'message' gets, instead of each row, one transactional logical decoding
// message (prefix cdc_outbox) with the same content as JSON.
//
// Internal to src/pg/apply/.  C++ regime.  deferred_outbox is a plain
// pointer (no C++ global with a destructor), set only while a segment
// runs; the cdc.outbox_source ids are cached per backend (id_cache.hpp).
#pragma once

#include "core/envelope.hpp"
#include "core/version.hpp"
#include "pg/apply/engine.hpp"
#include "pg/apply/image.hpp"
#include "pg/apply/target.hpp"

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

extern "C" {
#include "executor/tuptable.h"
}

namespace cdc::pg {

// The "source" JSON of history rows, handler metadata and dead letters (the
// outbox renders the same document in its view).
std::string SourceJson(const SourceInfo &src, const Version &v);

// An outbox row as cdc.outbox_rows stores it.  The jsonb Datums live in the
// memory context that was current when the row was made (the call's).
struct OutboxRow {
	size_t position = 0; // input position of the event: rows are inserted in this order
	Oid target = InvalidOid;
	std::array<unsigned char, 16> ikey{}; // md5 of the source identity (IdempotencyKey)
	int32_t src = 0;                      // cdc.outbox_source id
	char op = 'c';
	int32_t v0 = 0;
	int64_t v1 = 0, v2 = 0;
	std::optional<int64_t> v3; // nullopt: a 3-component version
	std::optional<int64_t> lsn, commit_lsn, tx_id;
	std::optional<Datum> entity_key, payload; // jsonb; nullopt: NULL
	// The payload is stored as its values alone (a JSON array), its member
	// names being those of the cdc.outbox_source entry src: a non-empty
	// object's, for a table outbox.
	bool payload_values = false;
	// `payload` is already that stored form (json text), made from the
	// image by StoredPayloadFromImage, not a jsonb.
	bool payload_stored = false;
	// `entity_key` is already its stored form (json text), made by
	// OutboxEntityKey, not a jsonb.
	bool entity_key_stored = false;
	// Written for a stream-ordered target: newer than every change applied
	// to it before (docs/semantics.md, "Stream ordering"), so no row of the
	// target can have its key yet.
	bool new_by_order = false;
	// Non-empty when the mapping's outbox_via is 'message': the JSON text of
	// the logical decoding message that replaces the row (OutboxMessage).
	std::string message;
};
struct DeferredOutbox {
	std::vector<OutboxRow> rows;
	size_t position = 0; // of the event being applied
};
// Set while a batch segment runs (a plain pointer: no C++ global with a
// destructor); reset by every ApplyEngine.
extern DeferredOutbox *deferred_outbox;


// Every row image below (and PayloadFromImage's) is printed under the
// payload settings (image.hpp, WithPayloadSettingsPg: those the worker
// pins), set only while the jsonb is built, not while the statements that
// write the row, and fire its triggers, run: the same change gives the same
// payload text whatever the session's DateStyle, IntervalStyle,
// bytea_output and extra_float_digits (found by review: bytea_output
// escape and IntervalStyle sql_standard changed cdc_apply()'s payloads;
// sql/outbox_payload_settings.sql).
//
// to_jsonb() of the row in `slot` (of a table's row type), exactly as
// to_jsonb(t) of that row in a statement: the payload of a row found and
// removed without SQL (table_write.hpp, FindRowsDirect).  The jsonb is
// allocated in the current memory context.  PostgreSQL regime.
Datum RowJsonbPg(TupleTableSlot *slot);
// The SQL expression of the row of alias `alias` of table `qualified` as a
// composite value, for a statement's RETURNING or select list whose
// column ResultRowsJsonb then converts.
std::string RowDatumSql(const std::string &alias, const std::string &qualified);
// to_jsonb() of column `col` (1-based, a RowDatumSql) of the first `n`
// rows of the last statement's result, converted as `as` (a cast to json
// of the type's owner may run); nullopt for NULL.  Allocated in the current
// memory context, so they outlive the result.
std::vector<std::optional<Datum>> ResultRowsJsonb(uint64_t n, int col, const RunAs &as);
// The same as JSON text (to_jsonb(...)::text).
std::vector<std::optional<std::string>> ResultRowsJsonText(uint64_t n, int col, const RunAs &as);

// May the payload of an applied upsert be built from its image
// (PayloadFromImage) instead of being read back from the table?  When the
// resulting row equals the image: full images (the caller checks), no
// triggers or rules (set-based targets), and no generated columns, which
// the destination computes.
bool PayloadFromImageAllowed(const Target &t);
// The payload of an upsert whose resulting row is exactly `img` (a full
// after-image): to_jsonb() of the target's row type formed from the image's
// Datums, i.e. PostgreSQL's own conversion, equal to to_jsonb(t) of the
// written row.
Datum PayloadFromImage(const Target &t, const Image &img, const RunAs &as);
// The same payload already in the form a table outbox stores it
// (cdc.outbox_rows.payload: the values as a JSON array, in jsonb key
// order, their member names in the cdc.outbox_source entry), printed
// straight from the image's Datums instead of building the jsonb and then
// printing it: byte for byte what MakeOutboxRow and the insert make of
// PayloadFromImage's jsonb.  nullopt where that form is not made here (an
// outbox as logical decoding messages, a column without a built-in
// rendering, no columns, names too long for the entry, a payload text over
// 128 MB), and with cdc.direct_writes off (the reference path, as for the
// engine's other direct writes): the caller then uses PayloadFromImage.  Errors as
// PayloadFromImage (54000 for a string jsonb cannot hold).  The Datum is
// allocated in the current memory context.
std::optional<Datum> StoredPayloadFromImage(const Target &t, const Image &img);
// The entity key of `img` for MakeOutboxRow: for a table outbox, in the
// form cdc.outbox_rows.entity_key stores it (compact JSON text, byte for
// byte what the insert makes of EntityKeyJsonb's jsonb), printed without
// the jsonb (`stored` true); otherwise (as for the payload, and for a key
// column without a value), EntityKeyJsonb (whose errors apply).  In the current memory
// context.
struct OutboxValue {
	Datum value;
	bool stored;
};
OutboxValue OutboxEntityKey(const Target &t, const Image &img);
// The stored form alone: nullopt where OutboxEntityKey would give the jsonb.
std::optional<Datum> StoredEntityKey(const Target &t, const Image &img);
// A JSON text as a jsonb Datum (jsonb_in: 22P02 for bad JSON).
Datum JsonbFromText(const std::string &json);
// The entity key of `img` as jsonb ({"id": "7"}), equal to
// EntityKey(t, img, ...)::jsonb, built without a parse.
Datum EntityKeyJsonb(const Target &t, const Image &img);

// Which values given to MakeOutboxRow are already in the form a table
// outbox stores them (StoredPayloadFromImage, OutboxEntityKey) rather
// than jsonb.
struct StoredForms {
	bool entity_key = false;
	bool payload = false;
};
// The outbox row of an applied change.  entity_key: JSON text ("" for a
// truncate); entity_key_jsonb: the same as jsonb when the caller has it
// (else parsed from the text), or its stored form (`stored.entity_key`);
// payload: jsonb or nullopt (a truncate), or with `stored.payload` the
// result of StoredPayloadFromImage for `t`.  std::logic_error for a
// stored form the target's outbox does not take.
OutboxRow MakeOutboxRow(const Target &t, const SourceInfo &src, char op, const Version &v,
                        const std::string &entity_key, std::optional<Datum> entity_key_jsonb,
                        std::optional<Datum> payload, size_t position, StoredForms stored = {});
// Writes (or, inside a segment, queues) the outbox row of an applied change
// whose payload was read back as JSON text; true when a row was inserted.
bool WriteOutbox(const Target &t, const SourceInfo &src, char op, const Version &v, const std::string &entity_key,
                 const std::optional<std::string> &payload);
// The same for a payload that is already jsonb (the row's to_jsonb read
// back as a Datum: no text in between), or with `payload_stored` the
// result of StoredPayloadFromImage.  `key_img`: the image whose key
// columns make `entity_key`, to print its stored form from
// (StoredEntityKey); without it, or where that form is not made, the text
// is parsed.
bool WriteOutboxJsonb(const Target &t, const SourceInfo &src, char op, const Version &v, const std::string &entity_key,
                      std::optional<Datum> payload, bool payload_stored = false, const Image *key_img = nullptr);
// Inserts the queued rows in input order (one statement; ON CONFLICT (ikey,
// target) DO NOTHING) and counts the inserted ones per target.
void FlushOutbox(DeferredOutbox &q, std::map<Oid, Counters> &counters);

} // namespace cdc::pg
