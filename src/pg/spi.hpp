// SQL execution for the apply engine: SPI with prepared plans cached per
// backend, typed parameters, and the switch of user (RunAs): to the
// extension owner for the engine's own bookkeeping tables (schema cdc), to
// a subscription's or a table's owner on the worker path.
//
// Every function here is called from the C++ regime and converts PostgreSQL
// errors into PgError (see guard.hpp).
#pragma once

#include "pg/guard.hpp"

#include <cstdint>
#include <optional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace cdc::pg {

// Positional parameters ($1, $2, ...) of one statement.
class Params {
  public:
	void Add(Oid type, Datum value, bool isnull);
	// Add for a value of a varlena type (typlen -1): one of at least
	// kByReferenceBytes goes to the statement by reference, not as a plan
	// constant.  (A custom plan folds every parameter into a constant, a
	// copy of the value: for a value as large as the event, one more copy
	// while the statement runs; docs/benchmarks.md, "Memory per event".)
	void AddVarlena(Oid type, Datum value, bool isnull);
	static constexpr size_t kByReferenceBytes = 64 * 1024;
	const std::vector<int> &ByReference() const { return by_ref_; }
	void AddText(const std::string &s);
	void AddTextOrNull(const std::optional<std::string> &s);
	void AddInt8(int64_t v);
	void AddOid(Oid v);
	void AddBool(bool v);
	void Clear();
	int Count() const { return int(types_.size()); }
	Oid *Types() { return types_.data(); }
	Datum *Values() { return values_.data(); }
	const char *Nulls() { return nulls_.data(); }

  private:
	std::vector<Oid> types_;
	std::vector<Datum> values_;
	std::vector<char> nulls_; // 'n' = NULL, ' ' = not null (SPI convention)
	std::vector<int> by_ref_; // indexes of parameters passed by reference (AddVarlena)
};

// Who a statement (or other code that may run user-defined functions, such
// as a domain's input) runs as (docs/security.md, "The worker's identity").
struct RunAs {
	enum class Kind : uint8_t {
		Caller,         // the current user, unchanged (target DML of cdc_apply())
		ExtensionOwner, // the owner of the extension's tables (bookkeeping)
		Role,           // `role` (the worker: the subscription or the table owner)
	};
	Kind kind = Kind::Caller;
	Oid role = InvalidOid;
	// Kind::Role: inside a security-restricted operation
	// (SECURITY_RESTRICTED_OPERATION), with a GUC nest level that undoes
	// every setting the code run changes, as PostgreSQL 16's
	// SwitchToUntrustedUser does for a table owner's code.
	bool restricted = false;
	// Kind::Role: row-level security not forced on the role's own tables
	// (SECURITY_NOFORCE_RLS), for reads that must see every row of a table
	// as its owner (cdc._rekey_pairs).
	bool all_rows = false;
	// Any kind: the statement reads with the latest snapshot instead of the
	// transaction's (SPI_execute_snapshot, as ri_triggers.c does), so that
	// under REPEATABLE READ and SERIALIZABLE it can lock and update a row
	// another transaction updated after this one's snapshot instead of
	// failing with 40001.  Only for the extension's own bookkeeping rows
	// (a prepared transaction's counters row: WriteCounts).
	bool latest_snapshot = false;

	static RunAs Caller() { return RunAs{}; }
	static RunAs ExtensionOwner() { return RunAs{Kind::ExtensionOwner, InvalidOid, false, false}; }
	static RunAs Role(Oid role, bool restricted) { return RunAs{Kind::Role, role, restricted, false}; }
};

// Runs `sql` (prepared once per backend and parameter types, then reused)
// with `params` as `as`.  Returns SPI_processed; rows are in SPI_tuptable.
// Errors: the statement's, as PgError.
uint64_t Execute(const std::string &sql, Params &params, const RunAs &as);
// as_owner: RunAs::ExtensionOwner() (bookkeeping), else RunAs::Caller().
inline uint64_t
Execute(const std::string &sql, Params &params, bool as_owner)
{
	return Execute(sql, params, as_owner ? RunAs::ExtensionOwner() : RunAs::Caller());
}

// The role that owns the extension's tables (schema cdc): one owner owns
// them all, read as the owner of cdc.ledger.  The role RunAs::ExtensionOwner
// switches to, and the one cdc._write_mapping writes cdc.mapping as.
// PostgreSQL regime (ereport, no PgError).  Errors: 3F000 no schema cdc,
// 42P01 no table cdc.ledger (the extension is not installed).
Oid ExtensionTablesOwner();

// The user switch behind RunAs, for PostgreSQL-regime code (plain data).
struct UserSwitch {
	Oid save_userid;
	int save_sec_context;
	int guc_nest_level; // 0: none opened
};
// Switches to `as` (no-op for RunAs::Caller).  PostgreSQL regime.
void BeginUserSwitch(const RunAs &as, UserSwitch *sw);
// Restores the user and security context (also on the error path, from
// PG_FINALLY).  PostgreSQL regime, cannot fail.
void RestoreUser(const UserSwitch *sw);
// After success: undoes the settings changed inside a restricted switch.
// On error the transaction's abort does it.  PostgreSQL regime.
void EndGucNest(const UserSwitch *sw);

// Runs `f` (PostgreSQL regime, as for PgCall) as `as`; an ERROR becomes a
// PgError as with PgCall.
template <typename F>
auto
PgCallAs(const RunAs &as, F &&f) -> decltype(f())
{
	using R = decltype(f());
	if (as.kind == RunAs::Kind::Caller)
		return PgCall(std::forward<F>(f));
	return PgCall([&]() -> R {
		UserSwitch sw;
		BeginUserSwitch(as, &sw);
		if constexpr (std::is_void_v<R>) {
			PG_TRY();
			{
				f();
			}
			PG_FINALLY();
			{
				RestoreUser(&sw);
			}
			PG_END_TRY();
			EndGucNest(&sw);
		} else {
			R result{};
			PG_TRY();
			{
				result = f();
			}
			PG_FINALLY();
			{
				RestoreUser(&sw);
			}
			PG_END_TRY();
			EndGucNest(&sw);
			return result;
		}
	});
}

// Text of column `col` (1-based) of result row `row`, nullopt for NULL.
std::optional<std::string> ResultText(uint64_t row, int col);
// Boolean column of a result row (NULL reads as false).
bool ResultBool(uint64_t row, int col);
// Integer column (smallint, integer, bigint or oid) of a result row, read as
// its Datum (no output function); nullopt for NULL.  Any other type: an
// internal error.
std::optional<int64_t> ResultInt(uint64_t row, int col);

// Opens the SPI connection for one entry-point call; Finish closes it.
void Connect();
void Finish();

// Double-quotes an identifier when needed (quote_identifier).
std::string QuoteIdent(const std::string &ident);

// md5 digest of `data` (ledger digests, content hashes, idempotency keys):
// the 16 bytes into `out`.  PostgreSQL's md5 (pg_md5_binary) sets up a
// cryptohash context, registers it with the resource owner and makes
// OpenSSL look the algorithm up again on every call, several times the cost
// of hashing a short text, three times per change; when PostgreSQL is built
// with OpenSSL (USE_OPENSSL) the digest is computed with OpenSSL's EVP
// digest, an MD5 implementation fetched once per backend and one digest
// context kept per backend (set up once, initialised again per digest; a
// plain pointer, never freed; EVP_Digest made and freed a context per call,
// 1.9 % of a cdc_apply() call for the ledger digest alone), the same
// algorithm, and pg_md5_binary is the fallback (no OpenSSL, or MD5 not
// available, as under a FIPS provider: then its error).  Errors: XX000
// when the digest cannot be computed.
void Md5Binary(const std::string &data, unsigned char out[16]);
// The same as the 32 lowercase hex digits of md5().
std::string Md5Hex(const std::string &data);
// Md5Binary of the concatenation of `pieces`, without building it: the
// pieces go one by one into the backend's digest context, which saves the
// concatenated text per digest (the outbox idempotency key, once per outbox
// row).  The same 16 bytes as
// Md5Binary of the concatenated text; the same fallback and errors.
void Md5BinaryOf(std::initializer_list<std::string_view> pieces, unsigned char out[16]);

// Md5Hex of a text given in pieces (Update), without the text ever being
// built: the content hash of an image streams its columns' texts, each as
// large as the event, into it (docs/benchmarks.md, "Memory per event").
// Small pieces are gathered in a buffer of kBuffer bytes: a text that fits
// is hashed in one call with the backend's context (Md5BinaryOf), a longer
// one goes through OpenSSL's incremental EVP digest a buffer (or a piece
// of at least kBuffer bytes, uncopied) at a time, in the backend's digest
// context while no other stream holds it (Md5Binary then uses one of its
// own), else in one of the stream's own.  Without OpenSSL the
// pieces are gathered and Md5Binary hashes them.  Errors: XX000 when the
// digest cannot be computed.
class Md5Stream {
  public:
	Md5Stream() = default;
	~Md5Stream();
	Md5Stream(const Md5Stream &) = delete;
	Md5Stream &operator=(const Md5Stream &) = delete;
	void Update(std::string_view piece);
	// The 32 hex digits; the stream is finished.
	std::string Hex();

  private:
	static constexpr std::size_t kBuffer = 1024;
	void Start(); // the incremental digest, once the text outgrows the buffer
	void Flush(); // the buffer into the digest (or the fallback's text)
	char buf_[kBuffer];
	std::size_t used_ = 0;
	void *ctx_ = nullptr;  // EVP_MD_CTX, once the text outgrew the buffer and OpenSSL's MD5 is available
	bool no_evp_ = false;  // OpenSSL's MD5 was not available
	std::string gathered_; // the fallback's text
};

// Makes ClippedForMessage (core/json.hpp) cut texts at the characters of
// the database's encoding (pg_mbcliplen): event values are in the
// database's encoding, and a message that is not valid in it turns the
// error into 22021 on its way to the client.  Called by _PG_init.
void InstallMessageClip();

} // namespace cdc::pg
