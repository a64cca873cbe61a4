// JSON string escaping (RFC 8259): the one place in the code base where text
// becomes the contents of a JSON string, for API answers, streams, logs,
// flight-recorder dumps and tool reports alike.
//
//   quote, backslash            ->  a backslash before it
//   \b \f \n \r \t              ->  their two-character escapes
//   any other byte < 0x20, DEL  ->  \u00XX (lower-case hex)
//   well-formed UTF-8           ->  copied as it is
//   any other byte              ->  \ufffd (U+FFFD), one per byte
//
// So the output is valid JSON (and valid UTF-8) whatever the input holds: a
// client's parameter names, a database's error text or a file name may carry
// anything. "Well-formed" excludes overlong forms, UTF-16 surrogates and code
// points past U+10FFFF.
//
// Runs of plain printable ASCII are copied in one append, so text with
// nothing to escape costs a scan and a copy.
//
// Thread safety: pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mb {

namespace json_internal {

// A byte copied as it is: printable ASCII other than '"' and '\\'.
constexpr bool IsPlain(unsigned char c) noexcept {
  return c >= 0x20U && c < 0x7FU && c != '"' && c != '\\';
}

// What replaces the input at one position that is not plain.
struct Escape {
  std::array<char, 6> text{};  // an escape, or a whole UTF-8 sequence
  uint8_t size = 0;            // chars of text used
  uint8_t consumed = 0;        // input bytes it stands for (>= 1)
};

// REQUIRES: i < s.size() and !IsPlain(s[i]).
Escape EscapeAt(std::string_view s, std::size_t i) noexcept;

}  // namespace json_internal

// Length of the well-formed UTF-8 sequence starting at s[i], or 0 when the
// bytes there are not one. REQUIRES: i < s.size().
std::size_t Utf8SequenceLength(std::string_view s, std::size_t i) noexcept;

// Appends the contents of a JSON string for `s` (no quotes) to *out: a
// std::string, an fmt::memory_buffer, or any buffer with push_back(char) and
// append(const char* first, const char* last).
template <class Buffer>
void AppendJsonEscaped(std::string_view s, Buffer* out) {
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t plain = i;
    while (plain < s.size() && json_internal::IsPlain(static_cast<unsigned char>(s[plain]))) {
      ++plain;
    }
    out->append(s.data() + i, s.data() + plain);
    if (plain == s.size()) return;
    const json_internal::Escape e = json_internal::EscapeAt(s, plain);
    out->append(e.text.data(), e.text.data() + e.size);
    i = plain + e.consumed;
  }
}

// Appends `s` as a JSON string, quotes included.
template <class Buffer>
void AppendJsonString(std::string_view s, Buffer* out) {
  out->push_back('"');
  AppendJsonEscaped(s, out);
  out->push_back('"');
}

// `s` as a JSON string, quotes included.
std::string JsonString(std::string_view s);

}  // namespace mb
