// The error bridge: see guard.hpp.
#include "pg/guard.hpp"
#include "pg/shared_stats.hpp"

#include "core/errors.hpp"
#include "core/json.hpp"

#include <algorithm>
#include <cstring>

extern "C" {
#include "mb/pg_wchar.h"
#include "utils/errcodes.h"
#include "utils/memutils.h"
}

namespace cdc::pg {

namespace {

// The innermost installed ApplyContext (in the frame of an InvokeCpp or
// RunCpp that is running); a plain pointer (no C++ global with a destructor).
ApplyContext *current_context = nullptr;

void
ApplyErrorContextCallback(void *arg) noexcept
{
	const ApplyContext *c = static_cast<const ApplyContext *>(arg);
	if (c->source) {
		char buf[kApplyContextBytes];
		c->source->FormatContext(buf, sizeof buf);
		errcontext("%s", buf);
	} else if (c->text)
		errcontext("%s", c->text);
}

// What the catch blocks copy out, so the ERROR can be raised after them.
// Fixed-size buffers: copying into them cannot fail or allocate.
struct PendingError {
	ErrorData *edata = nullptr; // a PgError: re-thrown unchanged
	int sqlerrcode = 0;
	char message[2048];
	char detail[2048];
	char hint[1024];
};

void
CopyText(char *dst, size_t size, const char *src) noexcept
{
	if (!src)
		src = "";
	/* a longer text is cut at a character boundary of the database encoding (pure computation, no ERROR) */
	size_t len = std::strlen(src);
	if (len > size - 1)
		len = size_t(pg_mbcliplen(src, int(std::min(len, size_t(INT32_MAX))), int(size - 1)));
	std::memcpy(dst, src, len);
	dst[len] = '\0';
}

PendingError pending;

} // namespace

ErrorData *
CaptureError(MemoryContext ctx) noexcept
{
	MemoryContextSwitchTo(ctx);
	ErrorData *edata = CopyErrorData();
	FlushErrorState();
	return edata;
}

void
PushApplyContext(ApplyContext *c) noexcept
{
	c->text = nullptr;
	c->source = nullptr;
	c->outer = current_context;
	c->callback.callback = ApplyErrorContextCallback;
	c->callback.arg = c;
	c->callback.previous = error_context_stack;
	error_context_stack = &c->callback;
	current_context = c;
}

void
PopApplyContext(ApplyContext *c) noexcept
{
	error_context_stack = c->callback.previous;
	current_context = c->outer;
}

void
SetErrorContext(const char *text) noexcept
{
	if (current_context != nullptr) {
		current_context->text = text;
		current_context->source = nullptr;
	}
}

void
SetErrorContextSource(const ContextSource *source) noexcept
{
	if (current_context != nullptr)
		current_context->source = source;
}

void
ReleaseErrorContextSource(const ContextSource *source) noexcept
{
	/*
	 * Any context of the stack may name it (set in an outer run, released in
	 * a nested one); the line goes into the context's own buffer, in the
	 * frame of its InvokeCpp / RunCpp, so every depth keeps its line.
	 */
	for (ApplyContext *c = current_context; c != nullptr; c = c->outer)
		if (c->source == source) {
			source->FormatContext(c->released, sizeof c->released);
			c->text = c->released;
			c->source = nullptr;
		}
}

void
StashCurrentException() noexcept
{
	pending.edata = nullptr;
	pending.detail[0] = pending.hint[0] = '\0';
	try {
		throw;
	} catch (const PgError &e) {
		pending.edata = e.edata();
	} catch (const cdc::InputError &e) {
		const char *s = e.sqlstate();
		pending.sqlerrcode = MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4]);
		CopyText(pending.message, sizeof pending.message, e.what());
		CopyText(pending.detail, sizeof pending.detail, e.detail().c_str());
		CopyText(pending.hint, sizeof pending.hint, e.hint().c_str());
	} catch (const cdc::JsonSyntaxError &e) {
		pending.sqlerrcode = ERRCODE_INVALID_TEXT_REPRESENTATION;
		CopyText(pending.message, sizeof pending.message, e.what());
	} catch (const std::bad_alloc &) {
		pending.sqlerrcode = ERRCODE_OUT_OF_MEMORY;
		CopyText(pending.message, sizeof pending.message, "out of memory in cdc_apply");
	} catch (const std::exception &e) {
		pending.sqlerrcode = ERRCODE_INTERNAL_ERROR;
		CopyText(pending.message, sizeof pending.message, e.what());
	} catch (...) {
		pending.sqlerrcode = ERRCODE_INTERNAL_ERROR;
		CopyText(pending.message, sizeof pending.message, "unknown C++ exception in cdc_apply");
	}
}

void
RaiseStashedError()
{
	if (pending.edata)
		ReThrowError(pending.edata);
	ereport(ERROR,
	        (errcode(pending.sqlerrcode), errmsg("%s", pending.message),
	         pending.detail[0] ? errdetail("%s", pending.detail) : 0,
	         pending.hint[0] ? errhint("%s", pending.hint) : 0));
	pg_unreachable();
}

Datum
InvokeCpp(CppFunction fn, FunctionCallInfo fcinfo, int counted_as) noexcept
{
	if (counted_as != 0)
		CountCall(counted_as);
	bool failed = false;
	Datum result = (Datum) 0;
	MemoryContext entry_context = CurrentMemoryContext;
	ApplyContext context;
	PushApplyContext(&context);

	try {
		result = fn(fcinfo);
	} catch (...) {
		failed = true;
		StashCurrentException();
	}

	if (!failed) {
		PopApplyContext(&context);
		return result;
	}

	/* Out of every catch block: now it is safe to longjmp. */
	MemoryContextSwitchTo(entry_context);
	/* counted here: the transaction that would record it rolls back (lock-free, no allocation) */
	if (counted_as != 0)
		CountFailedCall(counted_as, pending.edata ? pending.edata->sqlerrcode : pending.sqlerrcode);
	RaiseStashedApplyError(&context);
}

void
RaiseStashedApplyError(ApplyContext *c)
{
	if (pending.edata) { /* the copied ErrorData already carries its context */
		PopApplyContext(c);
	} else {
		/* the callback stays for this ERROR's CONTEXT line (it runs before the longjmp leaves this frame) */
		current_context = c->outer;
	}
	RaiseStashedError();
}

} // namespace cdc::pg
