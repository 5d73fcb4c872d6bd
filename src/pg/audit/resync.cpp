// CALL cdc.resync(subscription, target, keys | from_key/to_key | audit, ...)
// (docs/audit.md, "Repair"): re-reads the keys (given, in a range, or every
// unrepaired finding of an audit) from the source at one snapshot, the
// consistent point S of a temporary slot, once the worker has applied the
// stream up to S; compares them with the destination; and applies only the
// keys that differ through the apply engine, as snapshot rows versioned
// {epoch, S, 0, 0} (a key the source's snapshot does not publish: a delete
// at S, through the engine as well).  So a streamed change newer than S
// still wins, an older re-delivery stays stale, and the versions,
// tombstones and ledger stay those of an ordinary apply.  No outbox rows;
// handlers see is_snapshot.
//
// Glue, C++ regime: entry point through CDC_PG_FUNCTION, PostgreSQL calls
// through PgCall.  Commits after every batch of keys (DestSession).
#include "core/audit_diff.hpp"
#include "core/decision.hpp"
#include "core/errors.hpp"
#include "core/json.hpp"
#include "pg/apply/engine.hpp"
#include "pg/audit/common.hpp"
#include "pg/audit/session.hpp"
#include "pg/audit/source.hpp"
#include "pg/audit/tables.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
}

#include <map>

namespace cdc::pg::audit {

namespace {

constexpr size_t kBatch = 500;          // keys compared and applied per local transaction

std::string
JsonbText(Datum d)
{
	return PgCall([&]() { return DatumGetCString(DirectFunctionCall1(jsonb_out, d)); });
}

// One table's work.
struct Job {
	TableRef ref;
	bool by_keys = false;
	std::vector<std::string> key_json; // by_keys: the keys as JSON
	std::vector<int64_t> finding_ids;  // the findings they come from (resync of an audit), else empty
	std::optional<std::string> from_json, to_json;
	std::vector<Key> keys;             // by_keys: parsed
	cdc::audit::Range bounds;          // else: [from, to]
};

struct TableResync {
	DestSession &dest;
	Source &source;
	const Subscription &sub;
	Run &run;
	DestTable &dt;
	SourceTable &st;
	SourceConn &q;
	uint64_t cp;
	std::optional<int32_t> source_id;

	// The source row as an image (its JSON, for what keeps it, is built from
	// the values when needed: RawImage::Json).
	RawImage Image(const std::vector<std::string> &names, const std::vector<std::optional<std::string>> &values)
	{
		RawImage img;
		for (size_t i = 0; i < names.size(); i++)
			img.values.emplace_back(names[i], values[i] ? DecodedValue::Text(*values[i]) : DecodedValue::Null());
		return img;
	}

	// Compares `keys` at the snapshot and applies those that differ; marks
	// the findings `ids` (parallel to keys, or empty) with what happened.
	void Fix(const std::vector<Key> &keys, const std::vector<int64_t> &ids)
	{
		if (keys.empty())
			return;
		std::vector<SourceKeyRow> src = SourceRowsByKeys(q, st, keys, true);
		std::vector<cdc::audit::DestRow> dst = DestRowsByKeys(dest, dt, keys, source_id, sub.epoch, cp);
		std::vector<std::string> outcome(keys.size());
		std::vector<ChangeRequest> reqs;
		std::vector<size_t> positions, which;
		std::vector<std::string> key_names;
		for (const KeyColumn &k : dt.key)
			key_names.push_back(k.name);
		for (size_t i = 0; i < keys.size(); i++) {
			cdc::audit::Verdict v = cdc::audit::Classify(src[i].row, dst[i]);
			if (v == cdc::audit::Verdict::Equal || v == cdc::audit::Verdict::InFlight) {
				/* nothing to repair: equal, or the stream applied a change newer than the snapshot */
				outcome[i] = v == cdc::audit::Verdict::Equal ? "equal" : "newer";
				run.counters.unchanged++;
				continue;
			}
			if (v == cdc::audit::Verdict::Extra && !st.deletes_published) {
				/* the publications never delete its rows: kept, as the stream keeps them (TAP 116) */
				outcome[i] = "kept";
				run.counters.unchanged++;
				continue;
			}
			ChangeRequest req;
			req.target = dt.relid;
			req.source.connector = "pgoutput";
			req.source.name = "pg:" + source.SystemId();
			req.source.db = source.DbName();
			req.source.schema = st.schema;
			req.source.table = st.name;
			req.source.lsn = int64_t(cp);
			req.version = cdc::Version{{sub.epoch, int64_t(cp), 0, 0}};
			if (v == cdc::audit::Verdict::Extra) {
				/* not in the source's snapshot (or outside the publication's row filter): a delete at S */
				std::vector<std::optional<std::string>> key_values(keys[i].begin(), keys[i].end());
				req.op = Op::Delete;
				req.snapshot_delete = true;
				req.before = Image(key_names, key_values);
			} else {
				req.op = Op::Read;
				req.after = Image(st.columns, src[i].values);
			}
			reqs.push_back(std::move(req));
			positions.push_back(i + 1);
			which.push_back(i);
		}
		if (!reqs.empty()) {
			/* as the worker applies: its session settings are this session's own, triggers as on a replica */
			dest.Unpin();
			Params none;
			/*
			 * And array_nulls and xmloption as the worker pins them for its
			 * whole process (apply_worker.cpp).  The engine's own input
			 * conversion no longer needs them (InputInSettledSettingsPg sets
			 * both per call, image.cpp); they are for the code the apply
			 * runs, the target's triggers and handlers, which see here what
			 * they see under the worker (TAP 145 for the values)
			 */
			Execute("SELECT pg_catalog.set_config('session_replication_role', 'replica', true), "
			        "pg_catalog.set_config('array_nulls', 'on', true), pg_catalog.set_config('xmloption', 'content', true)",
			        none, false);
			ApplyEngine engine;
			/*
			 * As the worker applies: as the subscription's owner or the
			 * table's (docs/security.md), and, for a stream-ordered table, as
			 * an intake of its stream: the snapshot is not older than anything
			 * the stream applied before it (the wait above), so the mark stays
			 * exact (docs/audit.md, "Stream-ordered tables").  Always in a
			 * security-restricted operation with a GUC nest level, also where
			 * the worker would apply unrestricted: this session is the
			 * caller's, a superuser's, and a trigger could otherwise leave a
			 * setting, a temporary object, a deferred trigger or a held
			 * cursor for it to run (test/t/068_worker_deferred_trigger.pl,
			 * test/t/070_resync_session_state.pl).
			 */
			engine.SetWorkerIdentity(sub.owner, sub.run_as_owner, sub.name, /* restricted */ true);
			engine.SetStreamIntake(dt.stream_ordered);
			engine.SetPositionNames("key", "of the resync");
			std::vector<cdc::Outcome> out = engine.ApplyChanges(reqs, positions);
			engine.Finish();
			dest.ResetContext(); /* the engine's context text lives in the page's memory */
			for (size_t j = 0; j < out.size(); j++) {
				outcome[which[j]] = cdc::OutcomeName(out[j]);
				if (out[j] == cdc::Outcome::Applied)
					run.counters.repaired++;
				else
					run.counters.unchanged++;
			}
		}
		for (size_t i = 0; i < ids.size(); i++) {
			Params p;
			p.AddInt8(ids[i]);
			p.AddText(outcome[i]);
			p.AddText(LsnText(cp));
			Execute("UPDATE cdc.audit_findings SET repaired_at = pg_catalog.clock_timestamp(), repair_outcome = $2, "
			        "repair_lsn = $3::pg_catalog.pg_lsn WHERE id OPERATOR(pg_catalog.=) $1",
			        p, false);
		}
	}
};

} // namespace

} // namespace cdc::pg::audit

using namespace cdc::pg;
using namespace cdc::pg::audit;

/*
 * CALL cdc.resync(subscription text, target regclass DEFAULT NULL,
 *                 keys jsonb DEFAULT NULL, from_key jsonb DEFAULT NULL,
 *                 to_key jsonb DEFAULT NULL, audit bigint DEFAULT NULL,
 *                 page_rows integer DEFAULT 10000, leaf_rows integer DEFAULT 16384,
 *                 wait_timeout interval DEFAULT '5 min',
 *                 INOUT resync_id bigint DEFAULT NULL, INOUT repaired bigint DEFAULT NULL)
 *
 * Repairs the keys of target that differ from the source: `keys` (a JSON
 * array of keys, each {"column": "value", ...} or, for a one-column key, a
 * bare value), or every key in [from_key, to_key] (NULL: unbounded; both
 * NULL: the whole table), or with `audit` every finding of that audit not
 * repaired yet (of target only, when given).  Returns the run's id and the
 * number of keys written.  Errors: 22004 subscription, page_rows,
 * leaf_rows or wait_timeout NULL, or target NULL without audit (checked after the subscription), 42P01 target OID 0, 22023 conflicting arguments / a malformed key / page_rows
 * or leaf_rows < 1, 42704 unknown subscription or audit, 0A000 a history table or a
 * mapping ordered by a version column, and those of cdc.audit.
 */
CDC_PG_FUNCTION(cdc_resync)
{
	const CommonArgs args = ParseCommonArgs(fcinfo, 6);
	std::optional<std::string> keys_json, from_json, to_json;
	if (!PG_ARGISNULL(2))
		keys_json = JsonbText(PG_GETARG_DATUM(2));
	if (!PG_ARGISNULL(3))
		from_json = JsonbText(PG_GETARG_DATUM(3));
	if (!PG_ARGISNULL(4))
		to_json = JsonbText(PG_GETARG_DATUM(4));
	std::optional<int64_t> audit_id;
	if (!PG_ARGISNULL(5))
		audit_id = PG_GETARG_INT64(5);
	if (audit_id && (keys_json || from_json || to_json))
		throw cdc::InputError("22023", "audit cannot be combined with keys, from_key or to_key",
		                      "With audit, the keys are the audit's findings.");
	if (keys_json && (from_json || to_json))
		throw cdc::InputError("22023", "keys cannot be combined with from_key or to_key");
	std::vector<std::string> key_list;
	if (keys_json) {
		cdc::Json keys = cdc::Json::Parse(*keys_json);
		if (keys.IsArray()) {
			for (const cdc::Json &k : keys.Items())
				key_list.push_back(k.Serialize());
		} else {
			key_list.push_back(keys.Serialize());
		}
		if (key_list.empty())
			throw cdc::InputError("22023", "keys must not be empty");
	}

	DestSession dest(fcinfo, "cdc.resync");
	Subscription sub = ReadSubscription(args.subscription);
	/*
	 * After the subscription's look-up: CALL cdc.resync('nope') said
	 * "target must not be NULL" for a subscription that does not exist
	 * (fresh-user review h3); each bad argument gets its own error.
	 */
	if (!audit_id && !OidIsValid(args.target))
		throw cdc::InputError("22004", "target must not be NULL", {},
		                      "Name the table to repair, or pass audit => <id> to repair an audit's findings.");
	if (!sub.slot_ready)
		throw cdc::InputError("55000", "subscription \"" + args.subscription + "\" has not finished its initial copy");

	/* the work, table by table */
	std::vector<Job> jobs;
	if (audit_id) {
		Params p;
		p.AddInt8(*audit_id);
		if (Execute("SELECT r.subscription, r.kind FROM cdc.audit_runs r WHERE r.id OPERATOR(pg_catalog.=) $1", p, false) == 0)
			throw cdc::InputError("42704", "audit " + std::to_string(*audit_id) + " does not exist");
		if (*ResultText(0, 2) != "audit")
			throw cdc::InputError("22023", "run " + std::to_string(*audit_id) + " is a " + *ResultText(0, 2) + ", not an audit");
		if (*ResultText(0, 1) != args.subscription)
			throw cdc::InputError("22023", "audit " + std::to_string(*audit_id) + " is of subscription \"" + *ResultText(0, 1) +
			                                   "\", not \"" + args.subscription + "\"");
		p.Add(OIDOID, ObjectIdGetDatum(args.target), !OidIsValid(args.target));
		uint64_t n = Execute("SELECT f.id, f.target::pg_catalog.oid, f.key::pg_catalog.text FROM cdc.audit_findings f "
		                     "WHERE f.audit_id OPERATOR(pg_catalog.=) $1 AND f.repaired_at IS NULL "
		                     "AND ($2::pg_catalog.oid IS NULL OR f.target OPERATOR(pg_catalog.=) $2::pg_catalog.regclass) "
		                     "ORDER BY f.target::pg_catalog.oid, f.id",
		                     p, false);
		std::vector<std::tuple<int64_t, Oid, std::string>> rows;
		for (uint64_t i = 0; i < n; i++)
			rows.emplace_back(std::stoll(*ResultText(i, 1)), Oid(std::stoul(*ResultText(i, 2))), *ResultText(i, 3));
		for (auto &[id, oid, key] : rows) {
			if (jobs.empty() || jobs.back().ref.target != oid) {
				Job j;
				j.ref.target = oid;
				j.by_keys = true;
				jobs.push_back(std::move(j));
			}
			jobs.back().key_json.push_back(key);
			jobs.back().finding_ids.push_back(id);
		}
	} else {
		Job j;
		j.ref.target = args.target;
		j.by_keys = keys_json.has_value();
		j.key_json = key_list;
		j.from_json = from_json;
		j.to_json = to_json;
		jobs.push_back(std::move(j));
	}

	/* the tables and the keys, every argument checked before the source is touched */
	std::vector<DestTable> dts;
	for (Job &j : jobs) {
		dts.push_back(LoadDestTable(j.ref.target));
		const DestTable &dt = dts.back();
		if (dt.version_column)
			throw cdc::InputError("0A000", "table " + dt.display + " cannot be resynced: its mapping orders changes by a version column",
			                      "A resync writes snapshot rows versioned at a source position, which cannot be ordered "
			                      "against a column's values.",
			                      "Repair such a table with cdc.resync_table (a new copy).");
		TableRef ref = SubscriptionTables(dest, sub, j.ref.target).front(); /* 55000 unless the subscription has it ready */
		j.ref.schema = ref.schema;
		j.ref.name = ref.name;
		for (size_t i = 0; i < j.key_json.size(); i++)
			j.keys.push_back(KeyFromJson(dt, j.key_json[i], audit_id ? "the key of finding " + std::to_string(j.finding_ids[i])
			                                                         : "keys[" + std::to_string(i + 1) + "]"));
		j.bounds.after_inclusive = true;
		if (j.from_json)
			j.bounds.after = KeyFromJson(dt, *j.from_json, "from_key");
		if (j.to_json)
			j.bounds.up_to = KeyFromJson(dt, *j.to_json, "to_key");
	}
	Source source(sub.conninfo, sub.name);
	Run run(dest, "resync", sub, args.target, audit_id);
	run.counters.tables_total = int(jobs.size());
	std::optional<int32_t> source_id = SourceIdOf("pg:" + source.SystemId());
	for (const Job &j : jobs)
		run.counters.rows_estimate += j.by_keys ? int64_t(j.key_json.size()) : 0;
	bool range_estimated = false;
	for (const Job &j : jobs)
		if (!j.by_keys && !range_estimated) {
			run.counters.rows_estimate += EstimateRows(source, {j.ref});
			range_estimated = true;
		}
	run.Progress();

	for (size_t t = 0; t < jobs.size(); t++) {
		const Job &j = jobs[t];
		DestTable &dt = dts[t];
		const std::vector<Key> &keys = j.keys;
		SourceConn q = source.Connect();
		uint64_t cp = source.OpenSnapshot(q);
		SourceTable st = LoadSourceTable(q, sub, j.ref.schema, j.ref.name, dt);
		run.counters.current_target = dt.relid;
		run.counters.source_lsn = cp;
		dest.SetContext("cdc.resync of subscription \"" + args.subscription + "\", table " + dt.display + " at source position " + LsnText(cp));
		run.Progress();
		/* every change the stream committed before S is applied first, with its outbox rows and handler calls */
		WaitApplied(dest, sub, cp, args.timeout_ms);
		TableResync fix{dest, source, sub, run, dt, st, q, cp, source_id};
		if (j.by_keys) {
			for (size_t begin = 0; begin < keys.size(); begin += kBatch) {
				size_t end = std::min(keys.size(), begin + kBatch);
				std::vector<Key> batch(keys.begin() + long(begin), keys.begin() + long(end));
				std::vector<int64_t> ids;
				if (!j.finding_ids.empty())
					ids.assign(j.finding_ids.begin() + long(begin), j.finding_ids.begin() + long(end));
				fix.Fix(batch, ids);
				run.counters.rows_done += int64_t(batch.size());
				run.Progress();
			}
		} else {
			const cdc::audit::Range &bounds = j.bounds;
			SourceSide src(q, st);
			DestSide dst(dest, dt);
			std::vector<Key> pending;
			std::map<Key, bool> seen;
			cdc::audit::WalkStats stats;
			const int64_t rows_before = run.counters.rows_done;
			const auto ranges_before = run.counters.ranges_done;
			try {
			cdc::audit::Walk(
			    src, dst, bounds, args.page_rows, args.leaf_rows,
			    [&](cdc::audit::Candidate c) {
				    if (seen.emplace(c.key, true).second)
					    pending.push_back(std::move(c.key));
			    },
			    [&](const cdc::audit::WalkStats &s, const std::optional<Key> &) {
				    for (size_t begin = 0; begin < pending.size(); begin += kBatch) {
					    size_t end = std::min(pending.size(), begin + kBatch);
					    fix.Fix(std::vector<Key>(pending.begin() + long(begin), pending.begin() + long(end)), {});
					    run.Progress(); /* each batch commits */
				    }
				    pending.clear();
				    seen.clear();
				    run.counters.rows_done = rows_before + s.source_rows;
				    run.counters.ranges_done += 1;
				    run.Progress();
				    return true;
			    },
			    stats);
			} catch (const cdc::InputError &e) {
				/*
				 * The first hash of [from_key, to_key] checks that the range
				 * ascends on each side: before any page was done, a range
				 * that does not is the caller's from_key after its to_key
				 * (review h3: the message spoke of collations only).
				 */
				if (std::string(e.sqlstate()) != "0A000" || !bounds.after || !bounds.up_to ||
				    run.counters.ranges_done != ranges_before)
					throw;
				throw cdc::InputError("22023", "from_key is after to_key: the key range of table " + dt.display +
				                                   " is empty in the key order of " +
				                                   (e.detail().find("source") != std::string::npos ? "the source" : "the destination"),
				                      e.detail(), "Pass the smaller key as from_key.");
			}
		}
		q.Simple("COMMIT", PGRES_COMMAND_OK);
		run.counters.tables_done++;
		run.Progress();
	}
	run.Done();
	std::string summary = "cdc.resync of subscription \"" + args.subscription + "\" (run " + std::to_string(run.Id()) + "): " +
	                      std::to_string(run.counters.repaired) + " keys repaired, " +
	                      std::to_string(run.counters.unchanged) + " left as they were";
	cdc::pg::PgCall([&]() { ereport(NOTICE, (errmsg("%s", summary.c_str()))); });
	dest.Finish();
	return ProcedureResult(fcinfo, run.Id(), run.counters.repaired);
}
