// cdc._write_mapping: the one writer of cdc.mapping for cdc.register_mapping,
// cdc.unregister_mapping and cdc.set_ordering (docs/security.md,
// "Delegating mappings").
//
// Mappings were delegated by granting INSERT, UPDATE and DELETE on
// cdc.mapping, whose row-level security policy own_targets limited the rows
// a delegate could write.  But a role with UPDATE, DELETE or TRUNCATE on a
// table may LOCK it in any mode, and row-level security does not apply to
// LOCK: a delegate held ACCESS EXCLUSIVE on cdc.mapping in an open
// transaction and every worker and cdc_apply() caller waited (review h3,
// test/isolation/specs/security_mapping_lock.spec).  Now a delegate needs
// EXECUTE on those functions only.  This function checks the CALLING role
// (GetUserId(): the functions above run with their caller's rights) exactly
// as the policy own_targets would have, and only then writes the row as the
// owner of cdc.mapping, in a security-restricted operation, switching back
// on every exit (PG_FINALLY).  It is executable by PUBLIC, so it checks
// itself that the caller may execute the SQL function it serves: called
// directly it gives no more than what that function's grant plus the old
// table grants gave (a direct INSERT skipped cdc.register_mapping's
// validations too; the table's constraints and the policy's checks hold).
//
// PostgreSQL regime throughout, run under PgCall.
#include "pg/apply/target.hpp"
#include "pg/guard.hpp"
#include "pg/spi.hpp"

extern "C" {
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
}

#include <cstring>

namespace {

using cdc::pg::PgCall;

enum class Action { Register, Unregister, Lock, Ordering };

struct ActionInfo {
	const char *name;
	Action action;
	// the SQL function whose EXECUTE privilege allows the action
	const char *function;
};

const ActionInfo kActions[] = {
    {"register", Action::Register,
     "cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text, bigint, text, text, "
     "text, regprocedure, text, text)"},
    {"unregister", Action::Unregister, "cdc.unregister_mapping(regclass)"},
    {"lock", Action::Lock, "cdc.set_ordering(regclass, text)"},
    {"ordering", Action::Ordering, "cdc.set_ordering(regclass, text)"},
};

/*
 * As the caller: may it execute `function`; does row-level security of
 * cdc.mapping apply to it; would the policy own_targets let it see
 * (USING) the row of `target` and write (WITH CHECK) the new row.  The
 * expressions are the policy's (sql/cdc_apply--0.2.0.sql), the new row's
 * outbox and topic those of `row` (Register) or of the current row with
 * another ordering (Ordering); and (Register) may it execute the handler
 * of `row`, with the handler's name for the error.
 */
const char *const kCheckSql =
    "SELECT pg_catalog.has_function_privilege($1, 'EXECUTE'),"
    "       pg_catalog.row_security_active('cdc.mapping'::pg_catalog.regclass),"
    "       coalesce(pg_catalog.pg_has_role((SELECT c.relowner FROM pg_catalog.pg_class c"
    "                                         WHERE c.oid OPERATOR(pg_catalog.=) $2), 'USAGE'), false),"
    "       coalesce(pg_catalog.pg_has_role((SELECT c.relowner FROM pg_catalog.pg_class c"
    "                                         WHERE c.oid OPERATOR(pg_catalog.=) $2"
    "                                           AND c.relpersistence OPERATOR(pg_catalog.<>) 't'), 'USAGE')"
    "                AND (NOT n.outbox OR (n.outbox_topic IS NOT NULL"
    "                                      AND NOT cdc._outbox_topic_taken(n.outbox_topic, $2))), false),"
    "       coalesce(NOT $4 OR ($3).handler IS NULL"
    "                OR pg_catalog.has_function_privilege(($3).handler::pg_catalog.oid, 'EXECUTE'), true),"
    "       ($3).handler::pg_catalog.text"
    "  FROM (SELECT coalesce(CASE WHEN $4 THEN ($3).outbox"
    "                             ELSE (SELECT m.outbox FROM cdc.mapping m WHERE m.target OPERATOR(pg_catalog.=) $2) END,"
    "                        false) AS outbox,"
    "               CASE WHEN $4 THEN ($3).outbox_topic"
    "                    ELSE (SELECT m.outbox_topic FROM cdc.mapping m WHERE m.target OPERATOR(pg_catalog.=) $2) END"
    "                 AS outbox_topic) n";

const char *const kRegisterSql =
    "INSERT INTO cdc.mapping AS m (target, source_name, source_schema, source_table, key_columns, version_column,"
    "                              source_epoch, outbox, outbox_topic, truncate_policy, unavailable_placeholder,"
    "                              temporal_unit, conflict_policy, mode, handler, expired_policy, outbox_via)"
    " VALUES ($1, ($2).source_name, ($2).source_schema, ($2).source_table, ($2).key_columns, ($2).version_column,"
    "         ($2).source_epoch, ($2).outbox, ($2).outbox_topic, ($2).truncate_policy, ($2).unavailable_placeholder,"
    "         ($2).temporal_unit, ($2).conflict_policy, ($2).mode, ($2).handler, ($2).expired_policy, ($2).outbox_via)"
    " ON CONFLICT ON CONSTRAINT mapping_pkey DO UPDATE"
    "    SET source_name = EXCLUDED.source_name, source_schema = EXCLUDED.source_schema,"
    "        source_table = EXCLUDED.source_table, key_columns = EXCLUDED.key_columns,"
    "        version_column = EXCLUDED.version_column, source_epoch = EXCLUDED.source_epoch,"
    "        outbox = EXCLUDED.outbox, outbox_topic = EXCLUDED.outbox_topic,"
    "        truncate_policy = EXCLUDED.truncate_policy, unavailable_placeholder = EXCLUDED.unavailable_placeholder,"
    "        temporal_unit = EXCLUDED.temporal_unit, conflict_policy = EXCLUDED.conflict_policy,"
    "        mode = EXCLUDED.mode, handler = EXCLUDED.handler, expired_policy = EXCLUDED.expired_policy,"
    "        outbox_via = EXCLUDED.outbox_via, created_at = pg_catalog.now()"
    " RETURNING m.*";
const char *const kUnregisterSql =
    "DELETE FROM cdc.mapping m WHERE m.target OPERATOR(pg_catalog.=) $1 RETURNING m.*";
const char *const kLockSql =
    "SELECT m.* FROM cdc.mapping m WHERE m.target OPERATOR(pg_catalog.=) $1 FOR UPDATE";
const char *const kOrderingSql =
    "UPDATE cdc.mapping m SET ordering = ($2).ordering WHERE m.target OPERATOR(pg_catalog.=) $1 RETURNING m.*";

bool
BoolColumn(int col)
{
	bool isnull;
	Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull);
	return !isnull && DatumGetBool(d);
}

/*
 * Register: what cdc.register_mapping refuses for everyone, superusers too,
 * with its SQLSTATEs and messages.  The refused targets are the engine's
 * (ClassifyTargetPg, which CheckBeforeLock uses): a direct call had its own
 * copy of the checks, which left unlogged tables out (sql/unlogged_target.sql).
 */
void
CheckRegisterTarget(Oid target)
{
	const char relkind = get_rel_relkind(target);
	if (relkind == '\0')
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("relation with OID %u does not exist", target)));
	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE), errmsg("target %s is not a table", get_rel_name(target))));
	Oid unlogged;
	switch (cdc::pg::ClassifyTargetPg(target, &unlogged)) {
	case cdc::pg::TargetClass::Usable: return;
	case cdc::pg::TargetClass::Temporary:
		ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE), errmsg("target %s is a temporary table", get_rel_name(target)),
		                errdetail("A mapping, its ledger and entity records outlive the session; the table does not.")));
		break;
	case cdc::pg::TargetClass::Unlogged:
		ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
		                errmsg("target %s is or has an unlogged table",
		                       quote_qualified_identifier(get_namespace_name(get_rel_namespace(target)),
		                                                  get_rel_name(target))),
		                errdetail("A crash empties an unlogged table, while the ledger entries and entity records of "
		                          "its rows stay: their redeliveries would be duplicates and the rows would never "
		                          "come back."),
		                errhint("ALTER TABLE ... SET LOGGED, or map a permanent table.")));
		break;
	case cdc::pg::TargetClass::Internal:
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		                errmsg("table %s cannot be a target: it is a system catalog or a table of cdc_apply itself",
		                       get_rel_name(target))));
		break;
	}
}

} // namespace

/*
 * cdc._write_mapping(action text, target regclass, m cdc.mapping) RETURNS cdc.mapping
 *   'register'   inserts or replaces the mapping of target with the options of m
 *                (its target and ordering ignored; created_at now()),
 *   'unregister' deletes it,
 *   'lock'       reads it FOR UPDATE,
 *   'ordering'   sets its ordering to m.ordering;
 * each returns the row (NULL when there is none, or none the caller may
 * write, as the policy's USING clause left it out).  Errors: 22004 NULL
 * action or target, 22023 unknown action, 42501 the caller may not execute
 * the function the action serves or (register) the handler of m, or
 * (row-level security of cdc.mapping
 * applying to it) the new row is one the policy own_targets refuses, 42809
 * and 42501 a target cdc.register_mapping refuses for everyone (42809 not a
 * table, a temporary table, an unlogged table or a partitioned table with an
 * unlogged partition; 42501 a system catalog or a table of the schema cdc).
 */
CDC_PG_FUNCTION(cdc_write_mapping)
{
	return PgCall([&]() -> Datum {
		if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
			/* the one that is NULL: cdc.unregister_mapping(NULL) said "action and target" */
			ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
			                errmsg("%s must not be NULL", PG_ARGISNULL(0) ? "action" : "target")));
		char *action_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
		const ActionInfo *info = nullptr;
		for (const ActionInfo &a : kActions)
			if (strcmp(a.name, action_name) == 0)
				info = &a;
		if (info == nullptr)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			                errmsg("action must be 'register', 'unregister', 'lock' or 'ordering', not \"%s\"", action_name)));
		const Oid target = PG_GETARG_OID(1);
		const bool row_null = PG_ARGISNULL(2);
		const Datum row = row_null ? (Datum) 0 : PG_GETARG_DATUM(2);
		if (row_null && (info->action == Action::Register || info->action == Action::Ordering))
			ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("m must not be NULL for action %s", info->name)));

		TupleDesc result_desc;
		if (get_call_result_type(fcinfo, NULL, &result_desc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "cdc._write_mapping must return a composite type");
		const Oid row_type = result_desc->tdtypeid;

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "cdc._write_mapping: SPI_connect failed");

		/* 1. The checks, as the caller. */
		{
			Oid types[4] = {TEXTOID, REGCLASSOID, row_type, BOOLOID};
			Datum values[4] = {CStringGetTextDatum(info->function), ObjectIdGetDatum(target), row,
			                   BoolGetDatum(info->action == Action::Register)};
			char nulls[4] = {' ', ' ', row_null ? 'n' : ' ', ' '};
			if (SPI_execute_with_args(kCheckSql, 4, types, values, nulls, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
				elog(ERROR, "cdc._write_mapping: the check failed");
		}
		const bool may_call = BoolColumn(1);
		const bool policy_applies = BoolColumn(2);
		const bool may_see = BoolColumn(3);
		const bool may_write = BoolColumn(4);
		if (!may_call)
			ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE), errmsg("permission denied for function _write_mapping"),
			                errdetail("Writing a mapping (%s) needs EXECUTE on %s.", info->name, info->function)));
		if (info->action == Action::Register) {
			CheckRegisterTarget(target);
			/*
			 * As CREATE TRIGGER requires EXECUTE on the trigger function: the
			 * engine calls the handler with the rights of whoever applies (a
			 * superuser's cdc_apply(), a run_as_owner worker), so a role that
			 * may not execute a function must not make a mapping call it
			 * (review h2, sql/handler_execute.sql).  Superusers too, as
			 * PostgreSQL checks them (they always may).
			 */
			if (!BoolColumn(5)) {
				bool isnull;
				Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 6, &isnull);
				const char *fn = isnull ? "?" : TextDatumGetCString(d);
				ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				                errmsg("permission denied for function %s", fn),
				                errdetail("A mapping's handler must be a function the role registering it may execute."),
				                errhint("Grant EXECUTE on the handler function to the registering role, or choose a "
				                        "handler it may execute.")));
			}
		}
		if (policy_applies) {
			/*
			 * As the policy: rows the caller may not see are left out of an
			 * UPDATE, DELETE or SELECT FOR UPDATE; a new row it may not write
			 * (an INSERT, or an update of a row it sees) is an error.
			 */
			if (!may_see && info->action != Action::Register) {
				SPI_finish();
				fcinfo->isnull = true;
				return (Datum) 0;
			}
			if (!may_write && (info->action == Action::Register || info->action == Action::Ordering))
				ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				                errmsg("new row violates row-level security policy \"own_targets\" for table \"mapping\""),
				                errdetail("A delegate writes only the mappings of tables whose owner's privileges it has (not temporary tables), "
				                          "and a mapping with an outbox only with an outbox_topic of its own, not NULL and not another owner's."),
				                errhint("See docs/security.md, \"Delegating mappings\".")));
		}

		/* 2. The write, as the owner of cdc.mapping (who owns every cdc table). */
		const char *sql = nullptr;
		switch (info->action) {
		case Action::Register: sql = kRegisterSql; break;
		case Action::Unregister: sql = kUnregisterSql; break;
		case Action::Lock: sql = kLockSql; break;
		case Action::Ordering: sql = kOrderingSql; break;
		}
		Oid types[2] = {REGCLASSOID, row_type};
		Datum values[2] = {ObjectIdGetDatum(target), row};
		char nulls[2] = {' ', row_null ? 'n' : ' '};
		const int nargs = info->action == Action::Register || info->action == Action::Ordering ? 2 : 1;
		cdc::pg::UserSwitch sw;
		cdc::pg::BeginUserSwitch(cdc::pg::RunAs::Role(cdc::pg::ExtensionTablesOwner(), true), &sw);
		volatile int rc = 0;
		PG_TRY();
		{
			rc = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);
		}
		PG_FINALLY();
		{
			cdc::pg::RestoreUser(&sw);
		}
		PG_END_TRY();
		cdc::pg::EndGucNest(&sw);
		if (rc < 0)
			elog(ERROR, "cdc._write_mapping: SPI failed (%s)", SPI_result_code_string(rc));
		if (SPI_processed == 0) {
			SPI_finish();
			fcinfo->isnull = true;
			return (Datum) 0;
		}
		/* copied into the caller's context, typed as cdc.mapping */
		HeapTupleHeader result = SPI_returntuple(SPI_tuptable->vals[0], result_desc);
		SPI_finish();
		return PointerGetDatum(result);
	});
}
