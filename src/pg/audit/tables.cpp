// One table of an audit or resync on both sides: see tables.hpp.
#include "pg/audit/tables.hpp"

#include "core/errors.hpp"
#include "core/json.hpp"
#include "pg/worker/worker.hpp"
#include "pg/apply/image.hpp"
#include "pg/apply/target.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
}

#include <set>

namespace cdc::pg::audit {

using cdc::audit::Page;
using cdc::audit::Range;
using cdc::audit::RangeExprs;
using cdc::audit::RangeHash;
using cdc::audit::RowDigest;

namespace {

[[noreturn]] void
Fail(const char *sqlstate, const std::string &msg, const std::string &detail = {}, const std::string &hint = {})
{
	throw InputError(sqlstate, msg, detail, hint);
}

bool
OperatorInCatalog(Oid opr)
{
	return PgCall([&]() {
		if (!OidIsValid(opr))
			return false;
		HeapTuple tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(opr));
		if (!HeapTupleIsValid(tup))
			return false;
		bool ok = ((Form_pg_operator) GETSTRUCT(tup))->oprnamespace == PG_CATALOG_NAMESPACE;
		ReleaseSysCache(tup);
		return ok;
	});
}

// text[] result column as strings (PostgreSQL's own array parser).
std::vector<std::string>
TextArray(const std::string &literal)
{
	Params p;
	p.AddText(literal);
	uint64_t n = Execute("SELECT pg_catalog.unnest($1::pg_catalog.text[])", p, false);
	std::vector<std::string> out;
	for (uint64_t i = 0; i < n; i++)
		out.push_back(ResultText(i, 1).value_or(""));
	return out;
}

RangeHash
HashOf(const std::optional<std::string> &rows, const std::optional<std::string> &sum)
{
	RangeHash h;
	h.rows = rows ? std::stoll(*rows) : 0;
	h.sum = cdc::audit::ParseSum(sum.value_or(""));
	return h;
}

[[noreturn]] void
OrderMismatch(const std::string &table, const char *side)
{
	Fail("0A000", "the keys of table " + table + " are ordered differently on the source and the destination",
	     std::string("A key range bounded by keys of one side is not ascending on the ") + side + ".",
	     "The audit needs the same key order on both sides: give the key columns the same collation there.");
}

/*
 * The role the statements reading a destination table's rows run as: its
 * owner, in a security-restricted operation with a GUC nest level.
 * Planning a query on a table evaluates its index predicates and
 * expressions, and an IMMUTABLE function there with constant arguments runs
 * at plan time: as the superuser calling cdc.audit or cdc.resync it made the
 * table owner a superuser (test/t/071_resync_planner_code.pl, review
 * helper).  As the owner it runs with the owner's rights only.
 */
RunAs
ReaderOf(const DestTable &t)
{
	return RunAs::Role(t.owner, true);
}

/*
 * A key value of table `t` (text from either side) as a Datum of its key
 * column's type.  cdc.audit and cdc.resync run as a superuser; the input
 * function of a type that is not built in can run a role's code (a domain's
 * CHECK constraint calling a function of the table's owner, a composite's or
 * array's domain elements), so it runs as the table's owner in a
 * security-restricted operation, as the worker converts values
 * (docs/security.md, "The worker's identity").  Built-in types run no SQL.
 */
Datum
KeyDatum(const DestTable &t, const KeyColumn &c, const std::string &text)
{
	return PgCallAs(c.user_type ? ReaderOf(t) : RunAs::Caller(), [&]() {
		return cdc::pg::InputInSettledSettingsPg(c.input, const_cast<char *>(text.c_str()), c.ioparam, c.typmod);
	});
}

} // namespace

/* ------------------------------------------------------------------------ */

DestTable
LoadDestTable(Oid relid)
{
	DestTable t;
	t.relid = relid;
	Params p;
	p.AddOid(relid);
	if (Execute("SELECT n.nspname::pg_catalog.text, c.relname::pg_catalog.text, c.relkind::pg_catalog.text, "
	            "c.relowner FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace "
	            "WHERE c.oid OPERATOR(pg_catalog.=) $1",
	            p, false) == 0)
		Fail("42P01", "table with OID " + std::to_string(relid) + " does not exist");
	std::string schema = *ResultText(0, 1), name = *ResultText(0, 2), relkind = *ResultText(0, 3);
	t.owner = Oid(std::stoul(*ResultText(0, 4)));
	t.display = QuoteIdent(schema) + "." + QuoteIdent(name); /* for messages, as quote_identifier prints it */
	t.schema = schema;
	t.name = name;
	if (relkind != "r" && relkind != "p")
		Fail("42809", t.display + " is not a table");
	/*
	 * The table's rows are read as its owner (ReaderOf), and planning a
	 * read of a partitioned table folds every partition's index predicates
	 * and expressions: a partition of another owner's would run that
	 * owner's IMMUTABLE functions with this one's rights, a superuser's for
	 * a superuser's table (review h3, TAP 102).
	 */
	Oid part = InvalidOid, part_owner = InvalidOid;
	if (relkind == "p" && PgCall([&]() { return ForeignOwnedPartitionPg(relid, t.owner, &part, &part_owner); })) {
		std::string part_name = PgCall([&]() -> const char * {
			char *rel = get_rel_name(part);
			return rel ? quote_qualified_identifier(get_namespace_name(get_rel_namespace(part)), rel) : psprintf("%u", part);
		});
		std::string owner_name = PgCall([&]() { return GetUserNameFromId(part_owner, false); });
		std::string table_owner = PgCall([&]() { return GetUserNameFromId(t.owner, false); });
		Fail("42501", "partition " + part_name + " of table " + t.display + " is owned by \"" + owner_name +
		                  "\", whose code would run as \"" + table_owner + "\"",
		     "The audit reads a partitioned table as its owner; planning the read runs every partition's index "
		     "predicates and expressions.",
		     "Give the partition to the partitioned table's owner (ALTER TABLE " + part_name + " OWNER TO ...), or grant \"" +
		         table_owner + "\" to \"" + owner_name + "\".");
	}
	t.hashed.relation = QuoteIdent(schema) + "." + QuoteIdent(name);
	t.hashed.only = relkind == "r";

	uint64_t n = Execute("SELECT a.attname::pg_catalog.text, a.attgenerated OPERATOR(pg_catalog.<>) '' "
	                     "FROM pg_catalog.pg_attribute a WHERE a.attrelid OPERATOR(pg_catalog.=) $1 "
	                     "AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped ORDER BY a.attnum",
	                     p, false);
	for (uint64_t i = 0; i < n; i++)
		t.columns[*ResultText(i, 1)] = ResultBool(i, 2);

	std::vector<std::string> key;
	n = Execute("SELECT m.key_columns::pg_catalog.text, m.mode, m.version_column IS NOT NULL, "
	            "m.ordering OPERATOR(pg_catalog.=) 'stream' FROM cdc.mapping m "
	            "WHERE m.target OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
	            p, false);
	if (n > 0) {
		std::optional<std::string> cols = ResultText(0, 1);
		std::string mode = *ResultText(0, 2);
		t.version_column = ResultBool(0, 3);
		t.stream_ordered = ResultBool(0, 4);
		if (mode == "history")
			Fail("0A000", "table " + t.display + " is a history table",
			     "A history table holds one row per source change, not a mirror of the source table's rows.");
		if (cols)
			key = TextArray(*cols);
	}
	if (key.empty()) {
		n = Execute("SELECT a.attname::pg_catalog.text FROM pg_catalog.pg_index i, "
		            "pg_catalog.unnest(i.indkey::pg_catalog.int2[]) WITH ORDINALITY AS k(attnum, n), pg_catalog.pg_attribute a "
		            "WHERE i.indrelid OPERATOR(pg_catalog.=) $1 AND i.indisprimary AND a.attrelid OPERATOR(pg_catalog.=) i.indrelid "
		            "AND a.attnum OPERATOR(pg_catalog.=) k.attnum ORDER BY k.n",
		            p, false);
		for (uint64_t i = 0; i < n; i++)
			key.push_back(*ResultText(i, 1));
	}
	if (key.empty())
		Fail("42P10", "table " + t.display + " has no primary key",
		     {}, "The audit compares rows by their entity key: add a primary key or map the table with key_columns.");

	for (const std::string &k : key) {
		KeyColumn c;
		c.name = k;
		Params q;
		q.AddOid(relid);
		q.AddText(k);
		if (Execute("SELECT a.atttypid, a.atttypmod FROM pg_catalog.pg_attribute a WHERE a.attrelid OPERATOR(pg_catalog.=) $1 "
		            "AND a.attname OPERATOR(pg_catalog.=) $2::pg_catalog.name AND NOT a.attisdropped",
		            q, false) == 0)
			Fail("42703", "key column \"" + k + "\" does not exist in table " + t.display);
		c.type = Oid(std::stoul(*ResultText(0, 1)));
		c.typmod = std::stoi(*ResultText(0, 2));
		c.user_type = c.type >= FirstNormalObjectId;
		bool ordered = PgCall([&]() {
			TypeCacheEntry *tc = lookup_type_cache(getBaseType(c.type), TYPECACHE_EQ_OPR | TYPECACHE_LT_OPR | TYPECACHE_GT_OPR);
			return OidIsValid(tc->lt_opr) && OidIsValid(tc->gt_opr) && OidIsValid(tc->eq_opr) &&
			       OperatorInCatalog(tc->lt_opr) && OperatorInCatalog(tc->gt_opr) && OperatorInCatalog(tc->eq_opr);
		});
		if (!ordered)
			Fail("0A000", "key column \"" + k + "\" of table " + t.display + " has a type without built-in ordering",
			     "The audit reads key ranges with pg_catalog's comparison operators on both sides.",
			     "Audit tables whose key columns have built-in types (integers, text, uuid, dates and times, numeric, ...).");
		PgCall([&]() {
			getTypeInputInfo(c.type, &c.input, &c.ioparam);
			c.array_type = get_array_type(c.type);
			get_typlenbyvalalign(c.type, &c.typlen, &c.typbyval, &c.typalign);
		});
		if (!OidIsValid(c.array_type))
			Fail("0A000", "key column \"" + k + "\" of table " + t.display + " has a type without an array type");
		t.key.push_back(c);
		t.hashed.key.push_back(QuoteIdent(k));
	}
	return t;
}

std::pair<std::string, std::string>
SourceNameOf(const Subscription &sub, const DestTable &dest)
{
	Params p;
	p.AddOid(dest.relid);
	p.AddText(sub.name);
	if (Execute("SELECT m.source_schema, m.source_table FROM cdc.mapping m WHERE m.target OPERATOR(pg_catalog.=) "
	            "$1::pg_catalog.regclass AND (m.source_name IS NULL OR m.source_name OPERATOR(pg_catalog.=) $2)",
	            p, false) > 0)
		return {*ResultText(0, 1), *ResultText(0, 2)};
	return {dest.schema, dest.name};
}

SourceTable
LoadSourceTable(SourceConn &q, const Subscription &sub, const std::string &schema, const std::string &name, DestTable &dest)
{
	SourceTable t;
	t.schema = schema;
	t.name = name;
	const std::string display = QuoteIdent(schema) + "." + QuoteIdent(name);
	Result rel = q.Exec("SELECT c.oid, greatest(c.reltuples, 0)::pg_catalog.int8 FROM pg_catalog.pg_class c "
	                    "JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace "
	                    "WHERE n.nspname OPERATOR(pg_catalog.=) $1 AND c.relname OPERATOR(pg_catalog.=) $2",
	                    {schema, name});
	if (rel.Rows() != 1)
		Fail("42P01", "table " + display + " does not exist on the source of subscription \"" + sub.name + "\"");
	const std::string relid = rel.Text(0, 0);
	t.estimate = std::stoll(rel.Text(0, 1));
	/*
	 * Every query on the table below runs its owner's code as the connected
	 * role: planning folds the index expressions and predicates of the table
	 * (of every partition of a partitioned one), so an IMMUTABLE function
	 * there with constant arguments runs in this session, and so do its
	 * row-level security policies.  With a superuser in the conninfo, a
	 * source table's owner became one (review h4, TAP 133).  The source
	 * offers no security-restricted operation to a client, and SET ROLE
	 * would not hold (the code could RESET it): a table whose owner lacks
	 * the connected role's privileges is refused before any query on it, as
	 * the worker refuses a destination table whose owner the subscription
	 * owner is not a member of.  The worker's own copy (COPY table TO
	 * STDOUT) plans nothing.
	 */
	/* its partitions (pg_partition_tree gives no row for a table that is not partitioned) */
	const std::string tree = q.ServerVersion() >= 120000
	                             ? "SELECT t.relid FROM pg_catalog.pg_partition_tree($1::pg_catalog.oid::pg_catalog.regclass) t"
	                             : "SELECT NULL::pg_catalog.oid"; /* a plain table has none; the table itself is added below */
	Result foreign = q.Exec("SELECT c.oid::pg_catalog.regclass::pg_catalog.text, pg_catalog.pg_get_userbyid(c.relowner), "
	                        "CURRENT_USER::pg_catalog.text, c.oid OPERATOR(pg_catalog.=) $1::pg_catalog.oid FROM pg_catalog.pg_class c "
	                        "WHERE (c.oid OPERATOR(pg_catalog.=) $1::pg_catalog.oid "
	                        "       OR c.oid OPERATOR(pg_catalog.=) ANY (ARRAY(" + tree + ")::pg_catalog.oid[])) "
	                        "AND NOT pg_catalog.pg_has_role(c.relowner, CURRENT_USER, 'USAGE') "
	                        "ORDER BY c.oid OPERATOR(pg_catalog.<>) $1::pg_catalog.oid LIMIT 1",
	                        {relid});
	if (foreign.Rows() > 0) {
		const std::string which = foreign.Text(0, 0);
		const bool itself = foreign.Text(0, 3) == "t";
		Fail("42501",
		     (itself ? "table " + display : "partition " + which + " of table " + display) + " on the source of subscription \"" +
		         sub.name + "\" is owned by \"" + foreign.Text(0, 1) + "\", whose code would run as \"" + foreign.Text(0, 2) +
		         "\" when it is read",
		     "Planning a query on a table runs the functions of its index expressions and predicates (and its row-level "
		     "security policies) with the reading role's rights; cdc.audit and cdc.resync read the source's tables with "
		     "queries, as the role of the subscription's conninfo.",
		     "Connect with a role whose privileges the table's owner has (a replication role that is not a superuser, "
		     "granted SELECT on the published tables), or give the table to such a role.");
	}
	t.hashed.relation = QuoteIdent(schema) + "." + QuoteIdent(name);

	Result pub = q.Exec("SELECT 1 FROM pg_catalog.pg_publication_tables p WHERE p.pubname OPERATOR(pg_catalog.=) ANY (" +
	                        sub.PublicationsSql() + ") AND p.schemaname OPERATOR(pg_catalog.=) $1 "
	                        "AND p.tablename OPERATOR(pg_catalog.=) $2",
	                    {schema, name});
	if (pub.Rows() == 0)
		Fail("55000", "table " + display + " is not published by subscription \"" + sub.name + "\"");
	/*
	 * What the publications publish, read by the worker's own reader (the
	 * one its copies use): the column list, the row filters OR-ed, a
	 * partitioned root.
	 */
	const std::string literals = sub.PublicationLiterals();
	TableScope *scope = PgCall([&]() {
		TableScope *sc = (TableScope *) palloc0(sizeof(TableScope));
		read_table_scope(q.Raw(), literals.c_str(), schema.c_str(), name.c_str(), sc);
		return sc;
	});
	std::vector<std::string> published(scope->cols, scope->cols + scope->ncols);
	t.hashed.only = scope->relkind == 'r';
	if (scope->filter)
		t.hashed.filter = scope->filter;
	t.deletes_published = scope->deletes_published;

	for (const std::string &c : published) {
		auto d = dest.columns.find(c);
		if (d == dest.columns.end())
			Fail("42703", "column \"" + c + "\" published by the source is missing in table " + dest.display);
		if (d->second)
			continue; /* generated on the destination: its value is computed there, not replicated */
		t.columns.push_back(c);
		t.hashed.columns.push_back(QuoteIdent(c));
	}
	for (const KeyColumn &k : dest.key) {
		bool published = false;
		for (const std::string &c : t.columns)
			published = published || c == k.name;
		if (!published)
			Fail("0A000", "key column \"" + k.name + "\" of table " + dest.display + " is not published by the source",
			     "The audit compares rows by the destination's key, which the source must publish.");
		Result type = q.Exec("SELECT pg_catalog.format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_attribute a "
		                     "WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attname OPERATOR(pg_catalog.=) $2",
		                     {relid, k.name});
		t.key_types.push_back(type.Text(0, 0));
	}
	t.hashed.key = dest.hashed.key;
	dest.hashed.columns = t.hashed.columns;
	return t;
}

/* ------------------------------------------------------------------------ */

RangeExprs
SourceSide::Exprs(const Range &r, std::vector<std::optional<std::string>> &params) const
{
	RangeExprs e;
	e.lower_inclusive = r.after_inclusive;
	for (const std::optional<Key> *bound : {&r.after, &r.up_to}) {
		if (!*bound)
			continue;
		std::vector<std::string> &exprs = bound == &r.after ? e.lower : e.upper;
		for (size_t i = 0; i < (*bound)->size(); i++) {
			params.push_back((**bound)[i]);
			exprs.push_back("$" + std::to_string(params.size()) + "::" + t_.key_types[i]);
		}
	}
	return e;
}

RangeHash
SourceSide::Hash(const Range &r)
{
	std::vector<std::optional<std::string>> params;
	RangeExprs e = Exprs(r, params);
	Result res = q_.Exec(cdc::audit::RangeHashSql(t_.hashed, e, true), params);
	if (res.Text(0, 2) != "t")
		OrderMismatch(QuoteIdent(t_.schema) + "." + QuoteIdent(t_.name), "source");
	return HashOf(res.Value(0, 0), res.Value(0, 1));
}

Key
SourceSide::KeyAt(const Range &r, int64_t offset)
{
	std::vector<std::optional<std::string>> params;
	RangeExprs e = Exprs(r, params);
	params.push_back(std::to_string(offset));
	Result res = q_.Exec(cdc::audit::KeyAtSql(t_.hashed, e, "$" + std::to_string(params.size()) + "::pg_catalog.int8"), params);
	if (res.Rows() != 1)
		throw std::runtime_error("the source's snapshot lost a row of a range");
	Key k;
	for (size_t i = 0; i < t_.hashed.key.size(); i++)
		k.push_back(res.Text(0, int(i)));
	return k;
}

std::vector<RowDigest>
SourceSide::Rows(const Range &r)
{
	std::vector<std::optional<std::string>> params;
	RangeExprs e = Exprs(r, params);
	Result res = q_.Exec(cdc::audit::RangeRowsSql(t_.hashed, e), params);
	std::vector<RowDigest> out;
	const int nkey = int(t_.hashed.key.size());
	for (int row = 0; row < res.Rows(); row++) {
		RowDigest d;
		for (int i = 0; i < nkey; i++)
			d.key.push_back(res.Text(row, i));
		d.md5 = res.Text(row, nkey);
		out.push_back(std::move(d));
	}
	return out;
}

Page
SourceSide::PageOf(const Range &r, int64_t limit)
{
	std::vector<std::optional<std::string>> params;
	RangeExprs e = Exprs(r, params);
	params.push_back(std::to_string(limit));
	Result res = q_.Exec(cdc::audit::PageSql(t_.hashed, e, "$" + std::to_string(params.size()) + "::pg_catalog.int8"), params);
	Page p;
	p.hash = HashOf(res.Value(0, 0), res.Value(0, 1));
	if (!res.IsNull(0, 2)) {
		Key k;
		for (size_t i = 0; i < t_.hashed.key.size(); i++)
			k.push_back(res.Text(0, 2 + int(i)));
		p.last = k;
	}
	return p;
}

/* ------------------------------------------------------------------------ */

RangeExprs
DestSide::Exprs(const Range &r, Params &p) const
{
	RangeExprs e;
	e.lower_inclusive = r.after_inclusive;
	for (const std::optional<Key> *bound : {&r.after, &r.up_to}) {
		if (!*bound)
			continue;
		std::vector<std::string> &exprs = bound == &r.after ? e.lower : e.upper;
		for (size_t i = 0; i < (*bound)->size(); i++) {
			p.Add(t_.key[i].type, KeyDatum(t_, t_.key[i], (**bound)[i]), false);
			exprs.push_back("$" + std::to_string(p.Count()));
		}
	}
	return e;
}

RangeHash
DestSide::Hash(const Range &r)
{
	dest_.Pin();
	Params p;
	RangeExprs e = Exprs(r, p);
	Execute(cdc::audit::RangeHashSql(t_.hashed, e, true), p, ReaderOf(t_));
	if (!ResultBool(0, 3))
		OrderMismatch(t_.display, "destination");
	return HashOf(ResultText(0, 1), ResultText(0, 2));
}

Key
DestSide::KeyAt(const Range &r, int64_t offset)
{
	dest_.Pin();
	Params p;
	RangeExprs e = Exprs(r, p);
	p.AddInt8(offset);
	if (Execute(cdc::audit::KeyAtSql(t_.hashed, e, "$" + std::to_string(p.Count())), p, ReaderOf(t_)) != 1)
		throw std::runtime_error("a range of " + t_.display + " shrank while it was bisected");
	Key k;
	for (size_t i = 0; i < t_.key.size(); i++)
		k.push_back(ResultText(0, int(i) + 1).value_or(""));
	return k;
}

std::vector<RowDigest>
DestSide::Rows(const Range &r)
{
	dest_.Pin();
	Params p;
	RangeExprs e = Exprs(r, p);
	uint64_t n = Execute(cdc::audit::RangeRowsSql(t_.hashed, e), p, ReaderOf(t_));
	std::vector<RowDigest> out;
	const int nkey = int(t_.key.size());
	for (uint64_t row = 0; row < n; row++) {
		RowDigest d;
		for (int i = 0; i < nkey; i++)
			d.key.push_back(ResultText(row, i + 1).value_or(""));
		d.md5 = ResultText(row, nkey + 1).value_or("");
		out.push_back(std::move(d));
	}
	return out;
}

Page
DestSide::PageOf(const Range &r, int64_t limit)
{
	dest_.Pin();
	Params p;
	RangeExprs e = Exprs(r, p);
	p.AddInt8(limit);
	Execute(cdc::audit::PageSql(t_.hashed, e, "$" + std::to_string(p.Count())), p, ReaderOf(t_));
	Page page;
	page.hash = HashOf(ResultText(0, 1), ResultText(0, 2));
	if (ResultText(0, 3)) {
		Key k;
		for (size_t i = 0; i < t_.key.size(); i++)
			k.push_back(ResultText(0, 3 + int(i)).value_or(""));
		page.last = k;
	}
	return page;
}

/* ------------------------------------------------------------------------ */

std::vector<SourceKeyRow>
SourceRowsByKeys(SourceConn &q, const SourceTable &t, const std::vector<Key> &keys, bool with_values)
{
	std::vector<SourceKeyRow> out(keys.size());
	constexpr size_t kChunk = 500;
	for (size_t begin = 0; begin < keys.size(); begin += kChunk) {
		size_t end = std::min(keys.size(), begin + kChunk);
		std::vector<std::optional<std::string>> params;
		std::vector<std::string> arrays;
		for (size_t c = 0; c < t.hashed.key.size(); c++) {
			std::vector<std::string> column;
			for (size_t i = begin; i < end; i++)
				column.push_back(keys[i][c]);
			params.push_back(cdc::audit::ArrayLiteral(column));
			arrays.push_back("$" + std::to_string(c + 1) + "::" + t.key_types[c] + "[]");
		}
		Result res = q.Exec(cdc::audit::RowsByKeysSql(t.hashed, arrays, true, with_values), params);
		const int nkey = int(t.hashed.key.size());
		for (int row = 0; row < res.Rows(); row++) {
			size_t at = begin + size_t(std::stoll(res.Text(row, 0))) - 1;
			SourceKeyRow &r = out[at];
			r.row.found = true;
			r.row.md5 = res.Text(row, nkey + 1);
			r.row.in_scope = res.Text(row, nkey + 2) == "t";
			if (with_values)
				for (size_t c = 0; c < t.columns.size(); c++)
					r.values.push_back(res.Value(row, nkey + 3 + int(c)));
		}
	}
	return out;
}

std::vector<cdc::audit::DestRow>
DestRowsByKeys(DestSession &dest, const DestTable &t, const std::vector<Key> &keys, std::optional<int32_t> source_id,
               int64_t epoch, uint64_t lsn)
{
	std::vector<cdc::audit::DestRow> out(keys.size());
	constexpr size_t kChunk = 500;
	for (size_t begin = 0; begin < keys.size(); begin += kChunk) {
		size_t end = std::min(keys.size(), begin + kChunk);
		Params p;
		std::vector<std::string> arrays;
		for (size_t c = 0; c < t.key.size(); c++) {
			const KeyColumn &k = t.key[c];
			std::vector<Datum> values;
			for (size_t i = begin; i < end; i++)
				values.push_back(KeyDatum(t, k, keys[i][c]));
			Datum array = PgCall([&]() {
				return PointerGetDatum(construct_array(values.data(), int(values.size()), k.type, k.typlen, k.typbyval, k.typalign));
			});
			p.Add(k.array_type, array, false);
			arrays.push_back("$" + std::to_string(c + 1));
		}
		dest.Pin();
		uint64_t n = Execute(cdc::audit::RowsByKeysSql(t.hashed, arrays, false, false), p, ReaderOf(t));
		const int nkey = int(t.key.size());
		for (uint64_t row = 0; row < n; row++) {
			size_t at = begin + size_t(std::stoll(*ResultText(row, 1))) - 1;
			out[at].found = true;
			out[at].md5 = ResultText(row, nkey + 2).value_or("");
		}
		if (!source_id || t.version_column)
			continue;
		if (t.stream_ordered) {
			/* read after the rows: a mark newer than the snapshot means the stream changed the table since */
			Params m;
			m.AddOid(t.relid);
			m.Add(INT4OID, Int32GetDatum(*source_id), false);
			m.AddInt8(epoch);
			m.AddInt8(int64_t(lsn));
			if (Execute("SELECT 1 FROM cdc.stream_mark s WHERE s.target OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
			            "AND s.src::pg_catalog.int4 OPERATOR(pg_catalog.=) $2 "
			            "AND ROW(s.v0::pg_catalog.int8, s.v1, s.v2, s.v3::pg_catalog.int8) OPERATOR(pg_catalog.>) "
			            "ROW($3, $4, 0::pg_catalog.int8, 0::pg_catalog.int8)",
			            m, true) > 0)
				for (size_t i = begin; i < end; i++)
					out[i].newer = true;
			continue;
		}
		/*
		 * The entity records, by the compact key the engine stores
		 * (core/layout.hpp): the key columns' output texts in this session's
		 * own settings, as an apply in this session computes them.
		 */
		dest.Unpin();
		std::string compact;
		std::string aliases;
		for (size_t c = 0; c < t.key.size(); c++)
			aliases += "cdc_k" + std::to_string(c + 1) + ", ";
		if (t.key.size() == 1) {
			compact = "pg_catalog.format('%s', k.cdc_k1)";
		} else {
			compact = "ARRAY[";
			for (size_t c = 0; c < t.key.size(); c++)
				compact += (c ? ", " : "") + std::string("pg_catalog.format('%s', k.cdc_k") + std::to_string(c + 1) + ")";
			compact += "]::pg_catalog.text";
		}
		p.AddOid(t.relid);
		p.Add(INT4OID, Int32GetDatum(*source_id), false);
		p.AddInt8(epoch);
		p.AddInt8(int64_t(lsn));
		const int base = int(t.key.size());
		std::string unnest;
		for (size_t c = 0; c < t.key.size(); c++)
			unnest += (c ? ", " : "") + std::string("pg_catalog.unnest(") + arrays[c] + ")";
		n = Execute("SELECT k.cdc_ord FROM ROWS FROM (" + unnest + ") WITH ORDINALITY AS k(" + aliases +
		                "cdc_ord) JOIN cdc.entity_state e ON e.target OPERATOR(pg_catalog.=) $" + std::to_string(base + 1) +
		                "::pg_catalog.regclass AND e.key OPERATOR(pg_catalog.=) " + compact +
		                " WHERE e.src::pg_catalog.int4 OPERATOR(pg_catalog.=) $" + std::to_string(base + 2) +
		                " AND ROW(e.v0::pg_catalog.int8, e.v1, e.v2, e.v3::pg_catalog.int8) OPERATOR(pg_catalog.>) ROW($" +
		                std::to_string(base + 3) + ", $" + std::to_string(base + 4) + ", 0::pg_catalog.int8, 0::pg_catalog.int8)",
		            p, true);
		for (uint64_t row = 0; row < n; row++)
			out[begin + size_t(std::stoll(*ResultText(row, 1))) - 1].newer = true;
	}
	return out;
}

std::string
KeyJson(const DestTable &t, const Key &key)
{
	std::vector<std::string> names;
	for (const KeyColumn &k : t.key)
		names.push_back(k.name);
	return cdc::audit::KeyToJson(names, key);
}

Key
KeyFromJson(const DestTable &t, const std::string &json, const std::string &what)
{
	std::vector<std::string> names;
	for (const KeyColumn &k : t.key)
		names.push_back(k.name);
	Key key = cdc::audit::KeyFromJson(cdc::Json::Parse(json), names, what);
	/*
	 * Each value must be one of its column's type here, before the source
	 * is asked: a key the type refuses ("abc", 1.5 or 99999999999 for an
	 * integer) was sent to the source and came back as 'the source failed
	 * "SELECT ...": ERROR: invalid input syntax ...', naming neither the
	 * argument nor the column (fresh-user run h4, regress resync_key_values).
	 * The input function's error keeps its SQLSTATE, detail and hint.
	 */
	for (size_t c = 0; c < t.key.size(); c++) {
		const KeyColumn &k = t.key[c];
		try {
			KeyDatum(t, k, key[c]);
		} catch (const PgError &e) {
			ErrorData *ed = e.edata();
			std::string type_name = PgCall([&]() { return format_type_with_typemod(k.type, k.typmod); });
			std::string message = ed->message ? ed->message : "";
			if (key[c].size() > cdc::kMessageValueBytes) {
				const std::string clipped = cdc::ClippedForMessage(key[c]);
				for (size_t at = message.find(key[c]); at != std::string::npos; at = message.find(key[c], at + clipped.size()))
					message.replace(at, key[c].size(), clipped);
			}
			message = what + ": key column \"" + k.name + "\" of type " + type_name + ": " + message;
			PgCall([&]() { ed->message = pstrdup(message.c_str()); });
			throw;
		}
	}
	return key;
}

} // namespace cdc::pg::audit
