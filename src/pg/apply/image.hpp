// Images: a change's after- and before-images converted to the target's
// column types (Datums through the types' input functions, with their
// canonical output text), and what is derived from them: the entity key
// (JSON and compact), the content hash, the key predicate of a statement,
// and the PreparedChange every input path has before the dedup claim.
//
// Internal to src/pg/apply/.  C++ regime: PostgreSQL calls through PgCall;
// the Datums point into the caller's memory context.  Must not write to
// any table (SelectRowImage only reads).
#pragma once

#include "core/decode.hpp"
#include "core/json.hpp"
#include "core/version.hpp"
#include "pg/apply/engine.hpp"
#include "pg/apply/target.hpp"
#include "pg/spi.hpp"

#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace cdc::pg {

struct Cell {
	bool present = false;
	bool unavailable = false;
	bool isnull = true;
	Datum value = (Datum) 0;
	std::string text; // output-function text (canonical) of a key column, when present and not null
	                  // (other columns' texts are made only for the content hash, and dropped)
	// Present with a value not converted yet (ConvertImage with keys_only):
	// `value` is not set until CompleteImage.
	bool pending = false;
};

struct Image {
	std::vector<Cell> cells; // one per target column
	bool has_unavailable = false;
	const RawImage *raw = nullptr; // what it was converted from: raw->Json() for conflicts and outbox
	const char *which = "after";   // "after" or "before": the event field errors name
	bool complete = true;          // false: some cells are pending (CompleteImage converts them)
	// Throws (XX000, an internal error) unless the image is complete: what
	// reads non-key values calls it first.
	void RequireComplete() const;
};

// One change converted to the target's column types and identified: what
// every input path has before the dedup claim.
struct PreparedChange {
	bool is_delete = false;
	std::optional<Image> after, before;
	std::string entity_key; // of the after-image (upsert) or the before-image (delete)
	Version version;
	std::string delivery_key;
	const Image &Main() const { return is_delete ? *before : *after; }
};

// Decodes a Debezium JSON image (`after` or `before`) for target `t`: every
// field must name a column; values become text input form (decode.hpp).
// Errors 42602, 42703 and the decoder's (docs/debezium-types.md).  The
// object is handed over: the image keeps it for RawImage::Json().
RawImage DecodeJsonImage(const Target &t, Json &&obj, const FieldSchema *schema, const char *which);
// The same for an image read in place: object `obj` of `view` (the jsonb
// intake), which must outlive the image (RawImage::Json() reads it).  The
// same values and errors as from the image's tree.
RawImage DecodeViewImage(const Target &t, const cdc::JsonView &view, cdc::JsonView::Node obj, const FieldSchema *schema,
                         const char *which);
// Converts a RawImage into Datums of the target's column types; errors name
// the field and the column, with the type's SQLSTATE.  The image refers to
// `raw` (its JSON), which must outlive it.  The input functions
// of user-defined types (a domain's CHECK can run user code) run as `as`.
// With `keys_only`, only the key columns and the mapping's version column
// are converted; the other values are left pending (Cell::pending) for
// CompleteImage, so that a change the dedup claim and the version decision
// do not apply never has its non-key values converted (docs/semantics.md,
// "Duplicates are decided before values are converted").
Image ConvertImage(const Target &t, const RawImage &raw, const char *which, const RunAs &as, bool keys_only = false);
// Converts the pending cells of `img` (ConvertImage with keys_only) from
// its RawImage, with ConvertImage's errors; nothing to do when complete.
void CompleteImage(const Target &t, Image &img, const RunAs &as);
// Frees the converted values of non-key columns of `img` that are
// separate varlena allocations (palloc'd by built-in types' input
// functions) once a
// change's statements no longer need them; their cells become pending
// again (the image is incomplete).
// Returns the bytes freed (for TrimFreedMemory).
size_t ReleaseValues(const Target &t, Image &img);
// After an event-sized value was freed (at least kTrimBytes): gives the
// freed memory back to the operating system (glibc's malloc_trim).  A
// large block freed below others stays resident otherwise, and the next
// statement's copies of the value (its heap tuple, the TOAST compression
// attempt) come on top of it (docs/benchmarks.md, "Memory per event").
constexpr size_t kTrimBytes = 1024 * 1024;
void TrimFreedMemory(size_t bytes);
// The content hash of an image, as stored in cdc.entity_state.chash (the
// decimal text of a signed 32-bit CRC-32C; "0" stands for deletes, which
// are not hashed): see image.cpp for what it covers.  Errors of the
// values' output functions (SettledTextPg) as PgError.
std::string ContentHash(const Target &t, const Image &img);
// The content hash (ContentHash) to decide an equal-version change of
// `img` with: `content_hash` (its ContentHash), or the image's
// release hash where that one equals `stored_hash` (a record written by
// release 0.1.0, whose hashes were of the session's output texts: replayed
// from a session with the same settings, it stays a duplicate).  Only
// called for equal versions whose hashes differ, so the second hash costs
// nothing on the common path.  Not adopted when a float value of `img`
// prints, in the session's settings, a text that does not read back as the
// same value (extra_float_digits below 1): its release hash would equal
// a record of another value (a content difference taken for a duplicate).
std::string AdoptReleaseHash(const Target &t, const Image &img, const std::string &content_hash,
                             const std::string &stored_hash);
// The entity key as JSON ({"id": "7"}); 22023/22004 for a missing,
// unavailable or null key column.
std::string EntityKey(const Target &t, const Image &img, const char *which);
// The compact entity key of cdc.entity_state (core/layout.hpp).  54000
// (naming the key columns) for a key longer than kEntityKeyMaxBytes after
// compression, which cdc.entity_state's primary key could not hold.
constexpr size_t kEntityKeyMaxBytes = 2600;
std::string CompactKey(const Target &t, const Image &img);
// The key text of column `idx` (what entity records store) as a SQL
// expression over the target's row alias `t` (cdc._key_text), and
// CompactKey the same way; neither depends on the session's settings.
std::string KeyTextSql(const Target &t, int idx);
std::string CompactKeySql(const Target &t);
// The same over columns named `columns` (in key order) of alias t: what
// cdc._rekey_pairs reads under a mapping's old and new key_columns.
std::string CompactKeySql(const std::vector<std::string> &columns);
// The text of `value`, of type `type` and its FamilyPg `family`, as a
// session with PostgreSQL's default settings and TimeZone UTC prints it
// (ISO dates, timestamptz in UTC, hex bytea, shortest floats, postgres
// intervals), whatever the session's settings.  `out_fn`: the type's output
// function, for the other types.  PostgreSQL regime; palloc'd result.
char *SettledTextPg(ColumnType::Family family, Oid type, FmgrInfo *out_fn, Datum value);
// The input function's value of `text` with array_nulls on and xmloption
// content for the call, whatever the session's (a NULL element of an array
// literal is NULL; xml content is read as content).
Datum InputInSettledSettingsPg(FmgrInfo *in_fn, char *text, Oid ioparam, int32 typmod);
// The same by the input function's OID (as OidInputFunctionCall): the
// audit's key values (audit/tables.cpp).
Datum InputInSettledSettingsPg(Oid in_fn, char *text, Oid ioparam, int32 typmod);
// The settings every row image the engine makes (outbox payloads, the
// rows a handler gets, a conflict's stored_image: to_jsonb() of a row) is
// printed with, whatever the caller's session has: those the worker pins
// for its whole process (apply_worker.cpp), DateStyle ISO, IntervalStyle
// postgres, extra_float_digits 1 (or above: the same shortest exact
// decimal), bytea_output hex; TimeZone stays the session's (a timestamptz's
// JSON text carries its offset), as in the worker.  Sets those that differ
// until EndSettledOutputPg(the level returned), 0 when none needed setting
// (a session with the defaults pays four comparisons).  An error before
// EndSettledOutputPg leaves them to the (sub)transaction's abort, which
// undoes them.  Only around building the image: the target's statements,
// and so its triggers, run with the caller's settings.  PostgreSQL regime.
int BeginPayloadSettingsPg();
void EndSettledOutputPg(int nest);
// Runs `f` (PostgreSQL regime) under the payload settings: Begin, f, End
// when f returns; returns what f returns.  The one way to build a row
// image under them, so that no caller leaves them set.  When f raises a
// PostgreSQL ERROR (or throws), End is not called, as before: the
// (sub)transaction's abort undoes the nest level, and nothing may call
// PostgreSQL while an ERROR or exception unwinds (so no RAII guard).  Its
// frame holds only plain values, which a longjmp may skip.
template <typename F>
auto
WithPayloadSettingsPg(F &&f) -> decltype(f())
{
	const int nest = BeginPayloadSettingsPg();
	if constexpr (std::is_void_v<decltype(f())>) {
		f();
		EndSettledOutputPg(nest);
	} else {
		static_assert(std::is_trivially_destructible_v<decltype(f())>, "a longjmp may skip the result");
		const auto result = f();
		EndSettledOutputPg(nest);
		return result;
	}
}
// The key text of `value` (a key column's), as entity records name it:
// SettledTextPg's, with numeric without trailing zeros and float -0 as 0.
// cdc._key_text() in SQL.  PostgreSQL regime; palloc'd result.
char *KeyTextPg(ColumnType::Family family, Oid type, FmgrInfo *out_fn, Datum value);
// Do two images carry the same key?  (false when a key column the
// before-image `a` carries differs, whatever the others; true when none does)
bool SameKey(const Target &t, const Image &a, const Image &b);
// Refuses an update's before-image naming a key column as null (22004) or
// as the unavailable placeholder (22023): it cannot say whether the key changed.
void RequireUsableBeforeKey(const Target &t, const Image &before);
// Adds the key columns of `img` to `p`; returns "t.k1 = $n AND ...".
std::string KeyPredicate(const Target &t, const Image &img, Params &p);
// The target's row with the key of `key_img` as JSON text, if there is one
// (the statement runs as `as`).
std::optional<std::string> SelectRowImage(const Target &t, const Image &key_img, const RunAs &as);
// Converts the images of `req` (not a truncate; input functions of user
// types as `as`) and derives the entity key, the version and the delivery
// key (22023, 22004, 42703, input errors).
// With `keys_only`, the images' non-key values are left pending
// (ConvertImage): the caller completes them once the change is to be
// applied.
PreparedChange PrepareChange(const Target &t, const ChangeRequest &req, const RunAs &as, bool keys_only = false);

} // namespace cdc::pg
