// Source versions: the order of changes to one entity (SPEC §3, second question).
//
// A Version is a tuple of signed 64-bit integers compared lexicographically
// (like PostgreSQL's array comparison, which is how the glue stores it:
// bigint[]).  Which components a version has is decided by how it was derived
// (see DeriveDebeziumVersion and docs/semantics.md); two versions are only
// compared when they come from the same source (same source name), which
// the engine checks before calling Compare.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cdc {

// The components of a Version: a sequence of int64 that holds up to four
// inline (every derived version has three or four: docs/semantics.md), so
// that a version is made and copied per change without allocating; a longer
// one (a bigint[] read back from storage) is kept in a std::vector.
class VersionParts {
  public:
	static constexpr size_t kInline = 4;

	VersionParts() = default;
	VersionParts(const VersionParts &) = default;
	VersionParts &operator=(const VersionParts &) = default;
	// A moved-from VersionParts is empty (as a moved-from std::vector): the
	// implicit moves would leave n_ over a moved-from (empty) spill_.
	VersionParts(VersionParts &&o) noexcept { *this = std::move(o); }
	VersionParts &operator=(VersionParts &&o) noexcept
	{
		if (this != &o) {
			for (size_t i = 0; i < kInline; i++)
				inline_[i] = o.inline_[i];
			n_ = o.n_;
			spill_ = std::move(o.spill_);
			o.n_ = 0;
			o.spill_.clear();
		}
		return *this;
	}
	VersionParts(std::initializer_list<int64_t> values)
	{
		for (int64_t v : values)
			push_back(v);
	}

	size_t size() const { return n_; }
	bool empty() const { return n_ == 0; }
	const int64_t *data() const { return n_ <= kInline ? inline_ : spill_.data(); }
	const int64_t *begin() const { return data(); }
	const int64_t *end() const { return data() + n_; }
	int64_t operator[](size_t i) const { return data()[i]; }
	int64_t back() const { return data()[n_ - 1]; }

	void push_back(int64_t v)
	{
		if (n_ < kInline)
			inline_[n_] = v;
		else {
			if (n_ == kInline)
				spill_.assign(inline_, inline_ + kInline);
			spill_.push_back(v);
		}
		n_++;
	}
	void pop_back()
	{
		if (n_ == kInline + 1) {
			for (size_t i = 0; i < kInline; i++)
				inline_[i] = spill_[i];
			spill_.clear();
		} else if (n_ > kInline + 1)
			spill_.pop_back();
		n_--;
	}

	bool operator==(const VersionParts &o) const
	{
		if (n_ != o.n_)
			return false;
		for (size_t i = 0; i < n_; i++)
			if ((*this)[i] != o[i])
				return false;
		return true;
	}
	bool operator!=(const VersionParts &o) const { return !(*this == o); }
	// The components as a vector (tests, messages).
	std::vector<int64_t> ToVector() const { return std::vector<int64_t>(begin(), end()); }

  private:
	int64_t inline_[kInline] = {0, 0, 0, 0}; // components 0..3 while size() <= kInline
	size_t n_ = 0;
	std::vector<int64_t> spill_; // every component once size() > kInline; empty (no allocation) otherwise
};

struct Version {
	VersionParts parts;

	// <0, 0, >0 like strcmp; a proper prefix sorts first.
	static int Compare(const Version &a, const Version &b);
	bool operator<(const Version &o) const { return Compare(*this, o) < 0; }
	bool operator==(const Version &o) const { return parts == o.parts; }
	bool operator!=(const Version &o) const { return parts != o.parts; }
	bool empty() const { return parts.empty(); }
	// "{1,24023128,24023128,0}" — the bigint[] text form.
	std::string ToArrayLiteral() const;
	// Parses the bigint[] text form; nullopt on anything else.
	static std::optional<Version> FromArrayLiteral(std::string_view s);
};

// Parses an LSN given either as PostgreSQL text ("16/B374D848") or as a
// decimal integer (Debezium's source.lsn).  nullopt when it is neither or
// does not fit in a signed 64-bit integer.
std::optional<int64_t> ParseLsn(std::string_view s);
// Formats an LSN as PostgreSQL text ("16/B374D848").
std::string FormatLsn(int64_t lsn);

} // namespace cdc
