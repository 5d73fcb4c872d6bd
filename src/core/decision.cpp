#include "core/cpp_only.hpp" // first: this file is pure C++
#include "core/decision.hpp"

namespace cdc {

const char *
OutcomeName(Outcome o)
{
	switch (o) {
	case Outcome::Applied: return "applied";
	case Outcome::Duplicate: return "duplicate";
	case Outcome::Stale: return "stale";
	case Outcome::Conflict: return "conflict";
	case Outcome::Ignored: return "ignored";
	case Outcome::Expired: return "expired";
	}
	return "?";
}

Decision
Decide(const DecisionInput &in)
{
	Decision d;
	if (in.stored && in.stored->source != in.source) {
		d.outcome = Outcome::Conflict;
		d.reason = "versions from different sources are not ordered (stored source \"" + in.stored->source +
		           "\", event source \"" + in.source + "\")";
		return d;
	}
	if (in.barrier && Version::Compare(in.version, *in.barrier) <= 0) {
		d.outcome = Outcome::Stale;
		d.reason = "older than the table's truncate barrier " + in.barrier->ToArrayLiteral();
		return d;
	}
	if (in.stored) {
		int c = Version::Compare(in.version, in.stored->version);
		if (c < 0) {
			d.outcome = Outcome::Stale;
			d.blocked_resurrection = in.stored->deleted && !in.is_delete;
			d.reason = "older than the stored version " + in.stored->version.ToArrayLiteral();
			return d;
		}
		if (c == 0) {
			if (in.stored->content_hash == in.content_hash && in.stored->deleted == in.is_delete) {
				d.outcome = Outcome::Duplicate;
				d.reason = "same version and content as the stored record";
			} else {
				d.outcome = Outcome::Conflict;
				d.reason = "same version " + in.version.ToArrayLiteral() + " with different content";
			}
			return d;
		}
	}
	if (!in.stored && in.stream_mark && Version::Compare(in.version, *in.stream_mark) <= 0) {
		d.outcome = Outcome::Duplicate;
		d.reason = "no record of the entity and not newer than the stream mark " + in.stream_mark->ToArrayLiteral() +
		           ": processed while the target was stream-ordered";
		return d;
	}
	if (!in.stored && in.watermark && Version::Compare(in.version, *in.watermark) <= 0) {
		d.outcome = Outcome::Expired;
		d.reason = "no record of the entity and not newer than the prune watermark " + in.watermark->ToArrayLiteral() +
		           ": its records may have been pruned";
		return d;
	}
	if (!in.is_delete && in.has_unavailable && !in.row_exists) {
		d.outcome = Outcome::Conflict;
		d.reason = "the event has unavailable (unchanged TOAST) values for a row the destination does not have";
		return d;
	}
	d.outcome = Outcome::Applied;
	return d;
}

bool
ContentHashDecides(const DecisionInput &in)
{
	if (!in.stored || in.stored->source != in.source)
		return false;
	if (in.barrier && Version::Compare(in.version, *in.barrier) <= 0)
		return false;
	return Version::Compare(in.version, in.stored->version) == 0;
}

bool
StreamProcessed(const Version &v, bool is_snapshot, const Version &mark)
{
	int c = Version::Compare(v, mark);
	return is_snapshot ? c < 0 : c <= 0;
}

} // namespace cdc
