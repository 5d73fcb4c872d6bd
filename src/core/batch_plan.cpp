// The batch planner: see batch_plan.hpp.  Moved out of the glue
// (pg/apply/segment.cpp) unchanged in what it decides, so that GoogleTest
// covers it (test/unit/test_batch_plan.cpp).
//
// Pure C++: it must not include postgres.h, read a table or keep state
// between calls; every input arrives in the Chain and its SimInputs.
#include "core/cpp_only.hpp"

#include "core/batch_plan.hpp"

namespace cdc {

void
AddCounts(Counters &to, const Counters &from)
{
	to.applied += from.applied;
	to.duplicate += from.duplicate;
	to.stale += from.stale;
	to.conflict += from.conflict;
	to.ignored += from.ignored;
	to.blocked_resurrections += from.blocked_resurrections;
	to.outbox_rows += from.outbox_rows;
	to.snapshot_rows += from.snapshot_rows;
	to.expired += from.expired;
}

bool
Simulate(Chain &c, const std::vector<SimInput> &sim, const std::optional<Barrier> &barrier)
{
	std::optional<EntityRecord> record = c.stored;
	c.outcomes.assign(c.events.size(), Outcome::Applied);
	c.applied.clear();
	c.final_record.reset();
	c.counts = Counters{};
	for (size_t j = 0; j < c.events.size(); j++) {
		const size_t k = c.events[j];
		const SimInput &p = sim[k];
		DecisionInput in;
		in.version = p.version;
		in.source = p.source;
		in.is_delete = p.is_delete;
		in.content_hash = p.content_hash;
		in.stored = record;
		if (barrier && barrier->source == in.source)
			in.barrier = barrier->version;
		if (!record) {
			in.watermark = p.watermark;
			in.stream_mark = p.stream_mark;
		}
		Decision d = Decide(in);
		if (!p.claimed) {
			if (d.outcome == Outcome::Applied)
				return false;
			c.outcomes[j] = Outcome::Duplicate;
			c.counts.duplicate++;
			continue;
		}
		c.outcomes[j] = d.outcome;
		switch (d.outcome) {
		case Outcome::Stale:
			c.counts.stale++;
			if (d.blocked_resurrection)
				c.counts.blocked_resurrections++;
			break;
		case Outcome::Duplicate:
			c.counts.duplicate++;
			break;
		case Outcome::Ignored:
			c.counts.ignored++;
			break;
		case Outcome::Conflict:
		case Outcome::Expired:
			return false;
		case Outcome::Applied:
			if (p.violates_not_null)
				return false;
			record = EntityRecord{p.version, p.is_delete, in.content_hash, in.source};
			c.final_record = record;
			c.applied.push_back(k);
			c.counts.applied++;
			if (p.is_snapshot)
				c.counts.snapshot_rows++;
			break;
		}
	}
	return true;
}

std::optional<size_t>
RoundWrite(const Chain &c, bool collapse, size_t round)
{
	if (collapse && round == 0 && !c.applied.empty())
		return c.applied.back();
	if (!collapse && round < c.applied.size())
		return c.applied[round];
	return std::nullopt;
}

bool
RowExpectedAbsent(const Chain &c, bool collapse, size_t round, const std::vector<RowEffect> &effects)
{
	if (c.applied.empty() || (collapse && round > 0) || (!collapse && round >= c.applied.size()))
		return false;
	if (round == 0)
		return effects[c.applied.front()] == RowEffect::Create;
	return effects[c.applied[round - 1]] == RowEffect::Delete;
}

void
MarkCreateFromRecord(const Chain &c, std::vector<RowEffect> &effects)
{
	if (!c.set_based || c.applied.empty() || (c.stored && !c.stored->deleted))
		return;
	RowEffect &first = effects.at(c.applied.front());
	if (first != RowEffect::Delete)
		first = RowEffect::Create;
}

} // namespace cdc
