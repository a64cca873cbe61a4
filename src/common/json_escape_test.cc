#include "common/json_escape.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

namespace mb {
namespace {

TEST(JsonEscape, QuotesAndBackslashes) {
  EXPECT_EQ(JsonString(""), "\"\"");
  EXPECT_EQ(JsonString("plain text /:._-"), "\"plain text /:._-\"");
  EXPECT_EQ(JsonString("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(JsonString("\"\\\"\\"), R"("\"\\\"\\")");
}

// Every control character, one at a time: the five with a short form use it,
// the others (and DEL) are \u00XX in lower-case hex.
TEST(JsonEscape, EveryControlCharacter) {
  const std::string short_forms[] = {"", "",    "",    "",    "", "",    "",
                                     "", "\\b", "\\t", "\\n", "", "\\f", "\\r"};
  for (int c = 0; c < 0x20; ++c) {
    const std::string in(1, static_cast<char>(c));
    const std::string expected = c < 14 && !short_forms[c].empty()
                                     ? short_forms[c]
                                     : fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    std::string out;
    AppendJsonEscaped(in, &out);
    EXPECT_EQ(out, expected) << "byte " << c;
    // In the middle of text too (the plain runs around it are kept).
    EXPECT_EQ(JsonString("x" + in + "y"), "\"x" + expected + "y\"") << "byte " << c;
  }
  EXPECT_EQ(JsonString("\x7f"), R"("\u007f")");
  EXPECT_EQ(JsonString(std::string("nul\0byte", 8)), R"("nul\u0000byte")");
  EXPECT_EQ(JsonString("a\"b\\c\nd\te\x01\x7f/"), R"("a\"b\\c\nd\te\u0001\u007f/")");
}

TEST(JsonEscape, EveryPrintableAsciiByteIsKept) {
  for (int c = 0x20; c < 0x7f; ++c) {
    if (c == '"' || c == '\\') continue;
    const std::string in(1, static_cast<char>(c));
    EXPECT_EQ(JsonString(in), "\"" + in + "\"") << "byte " << c;
  }
}

TEST(JsonEscape, WellFormedUtf8PassesThrough) {
  const std::string text =
      "caf\xc3\xa9 "                        // U+00E9, two bytes
      "\xe2\x82\xac "                       // U+20AC, three bytes
      "\xf0\x9f\x98\x80 "                   // U+1F600, four bytes
      "\xc2\x80 \xdf\xbf "                  // the two-byte range's ends
      "\xe0\xa0\x80 \xef\xbf\xbf "          // the three-byte range's ends
      "\xed\x9f\xbf \xee\x80\x80 "          // either side of the surrogates
      "\xf0\x90\x80\x80 \xf4\x8f\xbf\xbf";  // the four-byte range's ends
  EXPECT_EQ(JsonString(text), "\"" + text + "\"");
}

TEST(JsonEscape, MalformedUtf8BecomesReplacementCharacters) {
  // A lone continuation byte, bytes that never occur, a truncated sequence.
  EXPECT_EQ(JsonString("\x80"), R"("\ufffd")");
  EXPECT_EQ(JsonString("\xff \xfe"), R"("\ufffd \ufffd")");
  EXPECT_EQ(JsonString("\xc3"), R"("\ufffd")");
  EXPECT_EQ(JsonString("\xc3 x"), R"("\ufffd x")");
  EXPECT_EQ(JsonString("\xe2\x82"), R"("\ufffd\ufffd")");
  // Overlong forms, surrogates, past U+10FFFF: one replacement per byte.
  EXPECT_EQ(JsonString("\xc0\xaf"), R"("\ufffd\ufffd")");
  EXPECT_EQ(JsonString("\xe0\x80\xaf"), R"("\ufffd\ufffd\ufffd")");
  EXPECT_EQ(JsonString("\xed\xa0\x80"), R"("\ufffd\ufffd\ufffd")");
  EXPECT_EQ(JsonString("\xf4\x90\x80\x80"), R"("\ufffd\ufffd\ufffd\ufffd")");
  EXPECT_EQ(JsonString("\xf5\x80\x80\x80"), R"("\ufffd\ufffd\ufffd\ufffd")");
  // Good text either side survives.
  EXPECT_EQ(JsonString("caf\xc3\xa9 \xff \xe2\x82\xac"), "\"caf\xc3\xa9 \\ufffd \xe2\x82\xac\"");
}

TEST(JsonEscape, Utf8SequenceLength) {
  EXPECT_EQ(Utf8SequenceLength("a", 0), 1u);
  EXPECT_EQ(Utf8SequenceLength("\xc3\xa9", 0), 2u);
  EXPECT_EQ(Utf8SequenceLength("\xe2\x82\xac", 0), 3u);
  EXPECT_EQ(Utf8SequenceLength("\xf0\x9f\x98\x80", 0), 4u);
  EXPECT_EQ(Utf8SequenceLength("\xf0\x9f\x98", 0), 0u);
  EXPECT_EQ(Utf8SequenceLength("x\xa9", 1), 0u);
}

TEST(JsonEscape, AppendsToAnyBuffer) {
  fmt::memory_buffer b;
  b.push_back('[');
  AppendJsonString("a\"\n\xc3\xa9", &b);
  b.push_back(']');
  EXPECT_EQ(fmt::to_string(b), "[\"a\\\"\\n\xc3\xa9\"]");

  std::string s = "{";
  AppendJsonEscaped("\t", &s);
  EXPECT_EQ(s, "{\\t");
}

}  // namespace
}  // namespace mb
