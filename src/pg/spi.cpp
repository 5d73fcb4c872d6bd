// SQL execution helpers: see spi.hpp.
#include "pg/spi.hpp"
#include "pg/guc.hpp"

#include "core/errors.hpp"
#include "core/json.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "common/md5.h"
#include "executor/spi.h"
#include "utils/snapmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/params.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
}

#ifdef USE_OPENSSL
#include <openssl/evp.h>
#endif

#include <cstring>
#include <stdexcept>

namespace cdc::pg {

void
Params::Add(Oid type, Datum value, bool isnull)
{
	types_.push_back(type);
	values_.push_back(value);
	nulls_.push_back(isnull ? 'n' : ' ');
}

void
Params::AddVarlena(Oid type, Datum value, bool isnull)
{
	if (!isnull && VARSIZE_ANY(DatumGetPointer(value)) >= kByReferenceBytes)
		by_ref_.push_back(Count());
	Add(type, value, isnull);
}

void
Params::AddText(const std::string &s)
{
	/*
	 * text cannot hold U+0000; one that does compares inconsistently (an
	 * index and ON CONFLICT disagree).  Inputs are checked where they enter
	 * (envelope fields, column values); this is the backstop for any other.
	 */
	if (s.find('\0') != std::string::npos)
		throw cdc::InputError(cdc::sqlstate::kInvalidTextRepresentation,
		                      "a text value contains a NUL character (\\u0000), which PostgreSQL text cannot hold");
	Datum d = PgCall([&]() { return PointerGetDatum(cstring_to_text_with_len(s.data(), int(s.size()))); });
	Add(TEXTOID, d, false);
}

void
Params::AddTextOrNull(const std::optional<std::string> &s)
{
	if (s)
		AddText(*s);
	else
		Add(TEXTOID, (Datum) 0, true);
}

void
Params::AddInt8(int64_t v)
{
	Add(INT8OID, Int64GetDatum(v), false);
}

void
Params::AddOid(Oid v)
{
	Add(OIDOID, ObjectIdGetDatum(v), false);
}

void
Params::AddBool(bool v)
{
	Add(BOOLOID, BoolGetDatum(v), false);
}

void
Params::Clear()
{
	types_.clear();
	values_.clear();
	nulls_.clear();
	by_ref_.clear();
}

Oid
ExtensionTablesOwner()
{
	/* The owner of cdc.ledger owns all of the extension's tables. */
	Oid relid = get_relname_relid("ledger", get_namespace_oid("cdc", false));
	if (!OidIsValid(relid))
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("table cdc.ledger does not exist"),
		                errhint("Run CREATE EXTENSION cdc_apply.")));
	HeapTuple tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	Oid owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

namespace {

/*
 * Backend-local cache of prepared plans, keyed by statement text and
 * parameter types.  Lives in TopMemoryContext (plain C structures: nothing
 * here has a destructor).  Plans are SPI_keepplan'ed; PostgreSQL's plan cache
 * re-plans them after DDL on the tables they use.
 *
 * At most cdc.plan_cache_size plans: the columns an event carries choose
 * the column lists of its statements, and a caller sending inserts with
 * ever other subsets of a table's columns made the backend keep a plan for
 * each (1,023 subsets of ten columns: 23 MB; sql/event_cache_bound.sql).
 * Beyond the limit a statement is prepared for its one execution and freed
 * after it, as on a hash collision.  Entries are never evicted: a plan may
 * be executing in an outer call (a trigger's nested cdc_apply()) when an
 * inner call looks up another.
 */
struct PlanEntry {
	uint32 hash; /* hash key */
	char *text;  /* statement text + '\0' + parameter type list, for collision checks */
	int text_len;
	SPIPlanPtr plan;
};

HTAB *plan_cache = nullptr;

SPIPlanPtr
LookupOrPrepare(const char *sql, int sql_len, const char *key, int key_len, int nargs, Oid *types, bool *kept)
{
	*kept = true;
	if (plan_cache == nullptr) {
		HASHCTL ctl;
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(uint32);
		ctl.entrysize = sizeof(PlanEntry);
		ctl.hcxt = TopMemoryContext;
		plan_cache = hash_create("cdc_apply plan cache", 128, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	uint32 h = hash_bytes((const unsigned char *) key, key_len);
	bool found;
	PlanEntry *e = (PlanEntry *) hash_search(plan_cache, &h, HASH_FIND, &found);
	if (found && e->text_len == key_len && memcmp(e->text, key, key_len) == 0)
		return e->plan;
	SPIPlanPtr p = SPI_prepare(sql, nargs, types);
	if (p == NULL)
		elog(ERROR, "cdc_apply: SPI_prepare failed for \"%s\": %s", sql, SPI_result_code_string(SPI_result));
	if (found || long(hash_get_num_entries(plan_cache)) >= long(cdc_plan_cache_size)) {
		*kept = false; /* a hash collision with another statement, or the cache is full: freed after its execution */
		return p;
	}
	if (SPI_keepplan(p) != 0)
		elog(ERROR, "cdc_apply: SPI_keepplan failed");
	char *text = (char *) MemoryContextAlloc(TopMemoryContext, key_len);
	memcpy(text, key, key_len);
	e = (PlanEntry *) hash_search(plan_cache, &h, HASH_ENTER, &found);
	e->text = text;
	e->text_len = key_len;
	e->plan = p;
	(void) sql_len;
	return p;
}

uint64
ExecutePg(const char *sql, int sql_len, const char *key, int key_len, int nargs, Oid *types, Datum *values,
          const char *nulls, const int *by_ref, int n_by_ref, const RunAs &as)
{
	MemoryContext caller_context = CurrentMemoryContext; /* see below */
	bool kept;
	SPIPlanPtr plan = LookupOrPrepare(sql, sql_len, key, key_len, nargs, types, &kept);
	MemoryContextSwitchTo(caller_context);
	/*
	 * The previous statement's result is read before the next statement runs
	 * (SPI_tuptable only ever holds the latest one).  Free it now: SPI keeps
	 * every result until SPI_finish, and the worker's engine lives for a
	 * whole group, so RETURNING rows (row images for outbox payloads) would
	 * otherwise pile up with the group's size.
	 */
	if (SPI_tuptable != NULL) {
		SPI_freetuptable(SPI_tuptable);
		SPI_tuptable = NULL;
	}
	UserSwitch sw;
	BeginUserSwitch(as, &sw);
	volatile int rc = 0;
	/*
	 * SPI leaves the procedure context (SPI Proc) current after every
	 * statement.  That context lives until SPI_finish, which for the worker
	 * is the end of a whole group, so everything allocated after a statement
	 * (converted values, array parameters, result strings) would pile up with
	 * the group's size.  Allocations stay in the caller's context instead:
	 * the worker's per-message context, a SQL function's call context.
	 * (SPI_prepare in LookupOrPrepare does the same, hence the switch above.)
	 */
	PG_TRY();
	{
		if (as.latest_snapshot) {
			/* no by-reference parameters here: WriteCounts passes plain values */
			Assert(n_by_ref == 0);
			rc = SPI_execute_snapshot(plan, values, nulls, GetLatestSnapshot(), InvalidSnapshot, false, false, 0);
		} else if (n_by_ref == 0) {
			rc = SPI_execute_plan(plan, values, nulls, false, 0);
		} else {
			/* as SPI_execute_plan's parameters, but these not constants a custom plan copies in */
			ParamListInfo pl = makeParamList(nargs);
			for (int i = 0; i < nargs; i++) {
				pl->params[i].value = values[i];
				pl->params[i].isnull = nulls[i] == 'n';
				pl->params[i].pflags = PARAM_FLAG_CONST;
				pl->params[i].ptype = types[i];
			}
			for (int j = 0; j < n_by_ref; j++)
				pl->params[by_ref[j]].pflags = 0;
			rc = SPI_execute_plan_with_paramlist(plan, pl, false, 0);
		}
		MemoryContextSwitchTo(caller_context);
	}
	PG_FINALLY();
	{
		RestoreUser(&sw);
	}
	PG_END_TRY();
	EndGucNest(&sw);
	if (!kept)
		SPI_freeplan(plan); /* ours alone (an error leaves it to SPI's context, freed with it) */
	if (rc < 0)
		elog(ERROR, "cdc_apply: SPI_execute_plan failed (%s) for \"%s\"", SPI_result_code_string(rc), sql);
	return SPI_processed;
}

} // namespace

void
BeginUserSwitch(const RunAs &as, UserSwitch *sw)
{
	GetUserIdAndSecContext(&sw->save_userid, &sw->save_sec_context);
	sw->guc_nest_level = 0;
	switch (as.kind) {
	case RunAs::Kind::Caller: return;
	case RunAs::Kind::ExtensionOwner:
		SetUserIdAndSecContext(ExtensionTablesOwner(), sw->save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
		return;
	case RunAs::Kind::Role: {
		const int all_rows = as.all_rows ? SECURITY_NOFORCE_RLS : 0;
		if (as.restricted) {
			SetUserIdAndSecContext(as.role, sw->save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
			                                    SECURITY_RESTRICTED_OPERATION | all_rows);
			sw->guc_nest_level = NewGUCNestLevel();
		} else {
			SetUserIdAndSecContext(as.role, sw->save_sec_context | SECURITY_LOCAL_USERID_CHANGE | all_rows);
		}
		return;
	}
	}
}

void
RestoreUser(const UserSwitch *sw)
{
	SetUserIdAndSecContext(sw->save_userid, sw->save_sec_context);
}

void
EndGucNest(const UserSwitch *sw)
{
	/* isCommit = false: whatever the code changed (even without LOCAL) is undone */
	if (sw->guc_nest_level > 0)
		AtEOXact_GUC(false, sw->guc_nest_level);
}

uint64_t
Execute(const std::string &sql, Params &params, const RunAs &as)
{
	/* Cache key: statement text, then the parameter type OIDs. */
	std::string key = sql;
	key.push_back('\0');
	key.append(reinterpret_cast<const char *>(params.Types()), sizeof(Oid) * size_t(params.Count()));
	return PgCall([&]() {
		return ExecutePg(sql.c_str(), int(sql.size()), key.data(), int(key.size()), params.Count(), params.Types(),
		                 params.Values(), params.Nulls(), params.ByReference().data(), int(params.ByReference().size()), as);
	});
}

std::optional<std::string>
ResultText(uint64_t row, int col)
{
	char *v = PgCall([&]() { return SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col); });
	if (v == nullptr)
		return std::nullopt;
	std::string s(v);
	PgCall([&]() { pfree(v); }); /* a row image can be as large as the event: one copy, not two */
	return s;
}

bool
ResultBool(uint64_t row, int col)
{
	return PgCall([&]() {
		bool isnull;
		Datum d = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, &isnull);
		return isnull ? false : DatumGetBool(d);
	});
}

std::optional<int64_t>
ResultInt(uint64_t row, int col)
{
	bool isnull = false;
	int64_t v = PgCall([&]() -> int64_t {
		Datum d = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, &isnull);
		if (isnull)
			return 0;
		switch (SPI_gettypeid(SPI_tuptable->tupdesc, col)) {
		case INT2OID: return DatumGetInt16(d);
		case INT4OID: return DatumGetInt32(d);
		case INT8OID: return DatumGetInt64(d);
		case OIDOID: return int64_t(DatumGetObjectId(d));
		default: elog(ERROR, "cdc_apply: result column %d is not an integer", col);
		}
		return 0;
	});
	if (isnull)
		return std::nullopt;
	return v;
}

void
Connect()
{
	PgCall([]() {
		/* SPI_connect makes SPI Proc current; stay in the caller's context (see ExecutePg) */
		MemoryContext caller_context = CurrentMemoryContext;
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "cdc_apply: SPI_connect failed");
		MemoryContextSwitchTo(caller_context);
	});
}

void
Finish()
{
	PgCall([]() { SPI_finish(); });
}

std::string
QuoteIdent(const std::string &ident)
{
	const char *q = PgCall([&]() { return quote_identifier(ident.c_str()); });
	return std::string(q);
}

namespace {

#ifdef USE_OPENSSL
/* The MD5 implementation, fetched once per backend (a plain pointer, never freed); NULL when unavailable. */
EVP_MD *
Md5Impl()
{
	static EVP_MD *md5_impl = nullptr;
	static bool md5_fetched = false;
	if (!md5_fetched) {
		md5_fetched = true;
		md5_impl = EVP_MD_fetch(nullptr, "MD5", nullptr);
	}
	return md5_impl;
}
#endif

} // namespace

namespace {

#ifdef USE_OPENSSL
/*
 * The backend's one EVP digest context (set up once, initialised again per
 * digest; a plain pointer, never freed: no C++ global with a destructor),
 * and whether an Md5Stream holds it.  NULL when OpenSSL's MD5 is not
 * available.
 */
EVP_MD_CTX *
BackendMd5Ctx()
{
	static EVP_MD_CTX *ctx = nullptr;
	if (ctx == nullptr && Md5Impl() != nullptr)
		ctx = EVP_MD_CTX_new();
	return ctx;
}
bool backend_ctx_in_stream = false;
#endif

/*
 * The digest of the concatenated pieces with the backend's context (one of
 * its own while an Md5Stream holds that one); false when OpenSSL cannot
 * give it.
 */
bool
Md5Evp(std::initializer_list<std::string_view> pieces, unsigned char out[16])
{
#ifdef USE_OPENSSL
	EVP_MD_CTX *own = backend_ctx_in_stream && Md5Impl() != nullptr ? EVP_MD_CTX_new() : nullptr;
	EVP_MD_CTX *ctx = backend_ctx_in_stream ? own : BackendMd5Ctx();
	bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx, Md5Impl(), nullptr) == 1;
	for (std::string_view p : pieces)
		ok = ok && EVP_DigestUpdate(ctx, p.data(), p.size()) == 1;
	unsigned int len = 0;
	ok = ok && EVP_DigestFinal_ex(ctx, out, &len) == 1 && len == 16;
	EVP_MD_CTX_free(own);
	return ok;
#else
	(void) pieces;
	(void) out;
	return false;
#endif
}

} // namespace

void
Md5Binary(const std::string &data, unsigned char out[16])
{
	if (Md5Evp({std::string_view(data)}, out))
		return;
	bool ok = PgCall([&]() {
		const char *errstr = NULL;
		return pg_md5_binary(data.data(), data.size(), out, &errstr);
	});
	if (!ok)
		throw std::runtime_error("could not compute MD5 hash");
}

void
Md5BinaryOf(std::initializer_list<std::string_view> pieces, unsigned char out[16])
{
	if (Md5Evp(pieces, out))
		return;
	std::string data;
	for (std::string_view p : pieces)
		data.append(p);
	Md5Binary(data, out);
}

namespace {

std::string
HexOf(const unsigned char sum[16])
{
	static const char digits[] = "0123456789abcdef";
	std::string hex(32, '0');
	for (int i = 0; i < 16; i++) {
		hex[size_t(2 * i)] = digits[sum[i] >> 4];
		hex[size_t(2 * i + 1)] = digits[sum[i] & 0xf];
	}
	return hex;
}

} // namespace

std::string
Md5Hex(const std::string &data)
{
	unsigned char sum[16];
	Md5Binary(data, sum);
	return HexOf(sum);
}

Md5Stream::~Md5Stream()
{
#ifdef USE_OPENSSL
	if (ctx_ != nullptr && ctx_ == BackendMd5Ctx())
		backend_ctx_in_stream = false;
	else
		EVP_MD_CTX_free(static_cast<EVP_MD_CTX *>(ctx_));
#endif
}

void
Md5Stream::Start()
{
#ifdef USE_OPENSSL
	if (ctx_ == nullptr && !no_evp_) {
		EVP_MD *md5_impl = Md5Impl();
		/* the backend's context while no other stream holds it, else one of its own */
		EVP_MD_CTX *shared = backend_ctx_in_stream ? nullptr : BackendMd5Ctx();
		EVP_MD_CTX *c = shared != nullptr ? shared : md5_impl != nullptr ? EVP_MD_CTX_new() : nullptr;
		if (c != nullptr && EVP_DigestInit_ex(c, md5_impl, nullptr) == 1) {
			ctx_ = c;
			if (c == shared)
				backend_ctx_in_stream = true;
		} else {
			if (c != shared)
				EVP_MD_CTX_free(c);
			no_evp_ = true;
		}
	}
#endif
}

void
Md5Stream::Flush()
{
	if (used_ == 0)
		return;
	Start();
#ifdef USE_OPENSSL
	if (ctx_ != nullptr) {
		if (EVP_DigestUpdate(static_cast<EVP_MD_CTX *>(ctx_), buf_, used_) != 1)
			throw std::runtime_error("could not compute MD5 hash");
		used_ = 0;
		return;
	}
#endif
	gathered_.append(buf_, used_);
	used_ = 0;
}

void
Md5Stream::Update(std::string_view piece)
{
	if (piece.size() <= kBuffer - used_) {
		memcpy(buf_ + used_, piece.data(), piece.size());
		used_ += piece.size();
		return;
	}
	Flush();
	if (piece.size() < kBuffer) {
		memcpy(buf_, piece.data(), piece.size());
		used_ = piece.size();
		return;
	}
	/* an event-sized piece goes through as it is, never copied */
	Start();
#ifdef USE_OPENSSL
	if (ctx_ != nullptr) {
		if (EVP_DigestUpdate(static_cast<EVP_MD_CTX *>(ctx_), piece.data(), piece.size()) != 1)
			throw std::runtime_error("could not compute MD5 hash");
		return;
	}
#endif
	gathered_.append(piece);
}

std::string
Md5Stream::Hex()
{
	unsigned char sum[16];
	if (ctx_ == nullptr && gathered_.empty()) {
		/* the whole text fitted in the buffer: one digest with the backend's context */
		Md5BinaryOf({std::string_view(buf_, used_)}, sum);
		used_ = 0;
		return HexOf(sum);
	}
	Flush();
#ifdef USE_OPENSSL
	if (ctx_ != nullptr) {
		unsigned int len = 0;
		if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX *>(ctx_), sum, &len) != 1 || len != 16)
			throw std::runtime_error("could not compute MD5 hash");
		return HexOf(sum);
	}
#endif
	Md5Binary(gathered_, sum);
	return HexOf(sum);
}

namespace {

std::size_t
ClipPrefixBytes(std::string_view s, std::size_t max_bytes)
{
	return std::size_t(PgCall([&]() { return pg_mbcliplen(s.data(), int(s.size()), int(max_bytes)); }));
}

} // namespace

void
InstallMessageClip()
{
	cdc::MessageClip clip;
	clip.prefix_bytes = &ClipPrefixBytes;
	cdc::SetMessageClip(clip);
}

} // namespace cdc::pg
