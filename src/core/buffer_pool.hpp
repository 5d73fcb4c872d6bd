// Spent per-change buffers kept for the next changes (issue 13: the
// worker's per-change heap allocations).  The apply worker decodes every
// pgoutput change into an image (a vector of (column name, value) pairs,
// the values' texts in std::strings) and a delivery key string; once its
// queue is applied they were freed and the next changes allocated the same
// buffers again (malloc/free 5-6 % of the worker's CPU).  A BufferPool keeps
// the spent vectors and strings, their small text buffers in place, so that
// the next images are written into them (ImageWriter) without allocating.
//
// Bounded: a string whose buffer exceeds kKeptStringBytes loses it when it
// is given back (an event-sized value is never held), and the pool keeps at
// most max_bytes of buffers in all (what it would exceed is freed).  Nothing
// read from a pooled buffer is ever a value: every Take()n buffer is
// written over (ImageWriter::Finish drops what the new image does not use,
// a taken string is cleared).
//
// Pure C++: no postgres.h (core/cpp_only.hpp), unit-tested in
// test/unit/test_buffer_pool.cpp.
#pragma once

#include "core/decode.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cdc {

// An image's values as every input path delivers them (pg/apply/engine.hpp,
// RawImage::values): column name -> NULL, unavailable, or text input form.
using ImageValues = std::vector<std::pair<std::string, DecodedValue>>;

class BufferPool {
  public:
	// Strings with a larger buffer are given back without it.
	static constexpr size_t kKeptStringBytes = 64;

	explicit BufferPool(size_t max_bytes) : max_bytes_(max_bytes) {}

	// A spent vector of values (its elements to be written over by an
	// ImageWriter), or an empty one.
	ImageValues TakeValues();
	// Keeps `values` for TakeValues() unless the pool is full (then it is
	// freed).  Any content: it is never read again.
	void GiveValues(ImageValues &&values);

	// An empty string, with a buffer from a spent one if the pool has one.
	std::string TakeString();
	void GiveString(std::string &&s);

	// Heap bytes the pool holds (vectors' and strings' buffers).
	size_t Bytes() const { return bytes_; }
	size_t Items() const { return values_.size() + strings_.size(); }
	void Clear();

	// The heap bytes of a string's own buffer (0 when it is held in place).
	static size_t HeapBytes(const std::string &s);
	// Of a vector of values and its strings.
	static size_t HeapBytes(const ImageValues &v);

  private:
	// Drops buffers over kKeptStringBytes; returns the heap bytes left.
	static size_t Trim(std::string &s);
	size_t max_bytes_;
	size_t bytes_ = 0;
	std::vector<std::pair<ImageValues, size_t>> values_;
	std::vector<std::pair<std::string, size_t>> strings_;
};

// Writes an image's values into a (possibly spent) vector, element by
// element, so that the elements' string buffers are reused:
//   ImageWriter w(pool.TakeValues());
//   w.Add(name, kind, text) ...;
//   ImageValues v = w.Finish();
// The result equals a vector built by emplace_back of the same values.
class ImageWriter {
  public:
	explicit ImageWriter(ImageValues &&spent) : v_(std::move(spent)) {}
	void Reserve(size_t n) { v_.reserve(n); }
	// `text` is read only for Kind::Text; other kinds have an empty text.
	void Add(std::string_view name, DecodedValue::Kind kind, std::string_view text = {});
	// The values added, nothing else of the spent vector.
	ImageValues Finish();

  private:
	ImageValues v_;
	size_t n_ = 0;
};

} // namespace cdc
