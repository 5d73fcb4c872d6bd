// The C++ <-> PostgreSQL error bridge (docs/internals.md, "Error bridge").
//
// Two regimes never mix:
//   * C++ regime: objects with destructors, exceptions.  A PostgreSQL ERROR
//     (a longjmp) must never pass through it.
//   * PostgreSQL regime: plain C calls that may ereport(ERROR).
//
// PgCall(f) runs f (PostgreSQL regime: f must not own objects with
// destructors) under PG_TRY; an ERROR becomes a PgError that carries the whole
// ErrorData (SQLSTATE, message, detail, hint, context), copied out of
// ErrorContext.  Entry points are defined with CDC_PG_FUNCTION, whose wrapper
// catches every C++ exception and raises the PostgreSQL ERROR only after the
// catch block has ended (re-throwing a PgError's ErrorData unchanged).
#pragma once

#include "pg/compat.hpp"

extern "C" {
#include "fmgr.h"
#include "utils/elog.h"
#include "utils/memutils.h"
}

#include <exception>
#include <type_traits>
#include <utility>

namespace cdc::pg {

// A PostgreSQL ERROR caught by PgCall.  Owns a palloc'd ErrorData copy.
class PgError : public std::exception {
  public:
	explicit PgError(ErrorData *edata) noexcept : edata_(edata) {}
	const char *what() const noexcept override { return edata_ && edata_->message ? edata_->message : "PostgreSQL error"; }
	int sqlerrcode() const noexcept { return edata_ ? edata_->sqlerrcode : 0; }
	ErrorData *edata() const noexcept { return edata_; }

  private:
	ErrorData *edata_;
};

// Copies the current error (we are in PG_CATCH) into `ctx` and clears the
// error state.  Plain C, no destructors.
ErrorData *CaptureError(MemoryContext ctx) noexcept;

// Runs `f` in the PostgreSQL regime.  Returns its result; a PostgreSQL ERROR
// inside becomes a thrown PgError.
template <typename F>
auto
PgCall(F &&f) -> decltype(f())
{
	using R = decltype(f());
	MemoryContext ctx = CurrentMemoryContext;
	ErrorData *volatile edata = nullptr;
	if constexpr (std::is_void_v<R>) {
		PG_TRY();
		{
			f();
		}
		PG_CATCH();
		{
			edata = CaptureError(ctx);
		}
		PG_END_TRY();
		if (edata)
			throw PgError(edata);
	} else {
		// R must be trivially destructible: it lives across a longjmp.
		static_assert(std::is_trivially_destructible_v<R>, "PgCall result must be a plain value");
		R result{};
		PG_TRY();
		{
			result = f();
		}
		PG_CATCH();
		{
			edata = CaptureError(ctx);
		}
		PG_END_TRY();
		if (edata)
			throw PgError(edata);
		return result;
	}
}

// Called inside a catch block: copies the exception in flight into a static
// buffer (no allocation, no PostgreSQL call).  RaiseStashedError, called after
// the catch block has ended, raises it as a PostgreSQL ERROR (a PgError's
// ErrorData unchanged; an InputError with its SQLSTATE; anything else XX000).
void StashCurrentException() noexcept;
[[noreturn]] void RaiseStashedError();

// What formats a context line only when a message needs it (the engine,
// whose context changes per change: its fields are kept, the text is made
// on error, as PostgreSQL's apply worker does with apply_error_callback).
// FormatContext writes at most `size` - 1 bytes and a NUL into `buf`; it is
// called from the error context callback, so it must not raise, throw or
// allocate.
class ContextSource {
  public:
	virtual size_t FormatContext(char *buf, size_t size) const noexcept = 0;

  protected:
	~ContextSource() = default;
};

// The longest context line a ContextSource formats (a label, a target's
// qualified name, a delivery key clipped to 200 bytes: well under it).
constexpr size_t kApplyContextBytes = 2048;

// The engine's error context of one run of C++ code from PostgreSQL-regime
// code (an entry point's call, InvokeCpp, or RunCpp): its error context
// callback and the text SetErrorContext gave it, or the ContextSource that
// formats it (SetErrorContextSource).  They nest: a call made
// while another runs (a trigger or handler applying a batch during a batch)
// has its own, and the outer call's text is intact when it returns or fails
// (its CONTEXT line shows under the inner one's).  Lives in the frame of
// InvokeCpp / RunCpp.
struct ApplyContext {
	ErrorContextCallback callback;
	const char *text;            // the CONTEXT line, or nullptr
	const ContextSource *source; // else formats it on demand, or nullptr
	ApplyContext *outer;         // the context this one is nested in
	// The line of a source released while it was this context's
	// (ReleaseErrorContextSource): text points here.
	char released[kApplyContextBytes];
};
// Installs (Push) and removes (Pop) `c` around C++ code run from
// PostgreSQL-regime code (RunCpp, InvokeCpp); the innermost installed
// context is the one SetErrorContext sets.
void PushApplyContext(ApplyContext *c) noexcept;
void PopApplyContext(ApplyContext *c) noexcept;
// RaiseStashedError with the callback of PushApplyContext still installed
// for a C++ exception (so the ERROR gets the engine's CONTEXT line), removed
// first for a PostgreSQL error (its ErrorData carries its context already).
// Either way the outer context is the current one again before the ERROR
// leaves (a caller that catches it goes on with its own text).
[[noreturn]] void RaiseStashedApplyError(ApplyContext *c);

// Runs C++ code `f` from PostgreSQL-regime code (a background worker's loop,
// a callback): an exception becomes a PostgreSQL ERROR raised after the
// catch, with the engine's context (SetErrorContext) as a CONTEXT line.
// `f` may own C++ objects; the caller's frame must not.
template <typename F>
void
RunCpp(F &&f)
{
	bool failed = false;
	ApplyContext context;
	PushApplyContext(&context);
	try {
		f();
	} catch (...) {
		failed = true;
		StashCurrentException();
	}
	if (failed)
		RaiseStashedApplyError(&context);
	PopApplyContext(&context);
}

using CppFunction = Datum (*)(FunctionCallInfo);

// Runs a SQL-callable C++ body; see CDC_PG_FUNCTION.  Never throws.
// `counted_as` (a CallKind of pg/shared_stats.hpp, 0 for none): the call
// is counted in shared memory before the body runs, and a failure is
// counted by SQLSTATE in the error path, after the catch block and before
// the ERROR is raised, so that it is counted even though the transaction
// rolls back (CDC_PG_ENTRY_POINT).
Datum InvokeCpp(CppFunction fn, FunctionCallInfo fcinfo, int counted_as = 0) noexcept;

// The description of what the engine is working on ("applying event 3 of the
// batch to table public.orders, delivery key ..."), added as CONTEXT to every
// error raised while an entry point runs.  The string must stay valid until
// the entry point returns (palloc it in the call's memory context).
void SetErrorContext(const char *text) noexcept;
// The context of what follows is formatted by `source` when a message needs
// it (no text per change).  `source` must call ReleaseErrorContextSource
// before it goes away.
void SetErrorContextSource(const ContextSource *source) noexcept;
// `source` goes away (its destructor, also while an exception unwinds the
// stack before the ERROR is raised): every context that names it has its
// line formatted now into its own buffer (ApplyContext::released), so that
// the ERROR still names what failed, at any nesting depth.
void ReleaseErrorContextSource(const ContextSource *source) noexcept;

} // namespace cdc::pg

// Defines a SQL-callable function `name` (extern "C", PGDLLEXPORT, V1 calling
// convention) whose body is C++ run under the bridge.  Usage:
//   CDC_PG_FUNCTION(cdc_apply_jsonb) { ... return PointerGetDatum(x); }
#define CDC_PG_FUNCTION(name)                                                                   \
	static Datum name##_cpp(FunctionCallInfo fcinfo);                                           \
	extern "C" {                                                                                \
	PG_FUNCTION_INFO_V1(name);                                                                  \
	}                                                                                           \
	extern "C" PGDLLEXPORT Datum name(PG_FUNCTION_ARGS)                                        \
	{                                                                                           \
		return cdc::pg::InvokeCpp(name##_cpp, fcinfo);                                          \
	}                                                                                           \
	static Datum name##_cpp(FunctionCallInfo fcinfo)

// As CDC_PG_FUNCTION, for the entry points whose calls and failed calls
// are counted in shared memory (cdc.call_stats): cdc_apply and
// cdc_apply_batch; `kind` is a CallKind (pg/shared_stats.hpp).
#define CDC_PG_ENTRY_POINT(name, kind)                                                          \
	static Datum name##_cpp(FunctionCallInfo fcinfo);                                           \
	extern "C" {                                                                                \
	PG_FUNCTION_INFO_V1(name);                                                                  \
	}                                                                                           \
	extern "C" PGDLLEXPORT Datum name(PG_FUNCTION_ARGS)                                        \
	{                                                                                           \
		return cdc::pg::InvokeCpp(name##_cpp, fcinfo, (kind));                                  \
	}                                                                                           \
	static Datum name##_cpp(FunctionCallInfo fcinfo)
