// Spent per-change buffers kept for the next changes: core/buffer_pool.hpp.
#include "core/buffer_pool.hpp"

namespace cdc {

size_t
BufferPool::HeapBytes(const std::string &s)
{
	/* a string's own (SSO) buffer holds 15 characters */
	return s.capacity() > std::string().capacity() ? s.capacity() + 1 : 0;
}

size_t
BufferPool::HeapBytes(const ImageValues &v)
{
	size_t bytes = v.capacity() * sizeof(ImageValues::value_type);
	for (const auto &[name, value] : v)
		bytes += HeapBytes(name) + HeapBytes(value.text);
	return bytes;
}

size_t
BufferPool::Trim(std::string &s)
{
	if (s.capacity() > kKeptStringBytes)
		std::string().swap(s);
	return HeapBytes(s);
}

ImageValues
BufferPool::TakeValues()
{
	if (values_.empty())
		return {};
	ImageValues v = std::move(values_.back().first);
	bytes_ -= values_.back().second;
	values_.pop_back();
	return v;
}

void
BufferPool::GiveValues(ImageValues &&values)
{
	if (values.capacity() == 0)
		return;
	size_t bytes = values.capacity() * sizeof(ImageValues::value_type);
	for (auto &[name, value] : values)
		bytes += Trim(name) + Trim(value.text);
	if (bytes_ + bytes > max_bytes_) {
		ImageValues().swap(values);
		return;
	}
	bytes_ += bytes;
	values_.emplace_back(std::move(values), bytes);
}

std::string
BufferPool::TakeString()
{
	if (strings_.empty())
		return {};
	std::string s = std::move(strings_.back().first);
	bytes_ -= strings_.back().second;
	strings_.pop_back();
	s.clear();
	return s;
}

void
BufferPool::GiveString(std::string &&s)
{
	const size_t bytes = Trim(s);
	if (bytes == 0)
		return; /* nothing on the heap to reuse */
	if (bytes_ + bytes > max_bytes_) {
		std::string().swap(s);
		return;
	}
	bytes_ += bytes;
	strings_.emplace_back(std::move(s), bytes);
}

void
BufferPool::Clear()
{
	std::vector<std::pair<ImageValues, size_t>>().swap(values_);
	std::vector<std::pair<std::string, size_t>>().swap(strings_);
	bytes_ = 0;
}

void
ImageWriter::Add(std::string_view name, DecodedValue::Kind kind, std::string_view text)
{
	if (kind != DecodedValue::Kind::Text)
		text = {};
	if (n_ < v_.size()) {
		auto &[n, value] = v_[n_];
		n.assign(name.data(), name.size());
		value.kind = kind;
		value.text.assign(text.data(), text.size());
	} else {
		DecodedValue value;
		value.kind = kind;
		value.text.assign(text.data(), text.size());
		v_.emplace_back(std::string(name), std::move(value));
	}
	n_++;
}

ImageValues
ImageWriter::Finish()
{
	v_.resize(n_); /* what the spent vector had beyond the new image is freed */
	n_ = 0;
	return std::move(v_);
}

} // namespace cdc
