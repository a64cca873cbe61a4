#include "load/ws_frames.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mb::load {
namespace {

using Kind = WsFrameReader::Kind;

// A server's frame: unmasked.
std::string ServerFrame(uint8_t first_byte, std::string_view payload) {
  std::string f(1, static_cast<char>(first_byte));
  if (payload.size() < 126) {
    f.push_back(static_cast<char>(payload.size()));
  } else if (payload.size() <= 0xFFFF) {
    f.push_back(126);
    f.push_back(static_cast<char>(payload.size() >> 8));
    f.push_back(static_cast<char>(payload.size() & 0xFF));
  } else {
    f.push_back(127);
    for (int i = 7; i >= 0; --i) f.push_back(static_cast<char>((payload.size() >> (8 * i)) & 0xFF));
  }
  return f + std::string(payload);
}

std::vector<std::string> Messages(WsFrameReader& r) {
  std::vector<std::string> out;
  for (auto it = r.Next(); it.kind == Kind::kMessage; it = r.Next()) out.emplace_back(it.data);
  return out;
}

TEST(WsFrameReader, EveryLengthFormSplitAnywhere) {
  const std::string a(5, 'a'), b(300, 'b'), c(70'000, 'c');
  const std::string wire = ServerFrame(0x81, a) + ServerFrame(0x81, b) + ServerFrame(0x82, c);
  WsFrameReader r;
  std::vector<std::string> got;
  for (char ch : wire) {  // one byte per read: every split of every header
    r.Feed(std::string_view(&ch, 1));
    for (auto it = r.Next(); it.kind != Kind::kNeedMore; it = r.Next()) {
      ASSERT_EQ(it.kind, Kind::kMessage);
      got.emplace_back(it.data);
    }
  }
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], a);
  EXPECT_EQ(got[1], b);
  EXPECT_EQ(got[2], c);
}

// A handshake answer with no frame after it feeds nothing.
TEST(WsFrameReader, NothingFedIsNothingToRead) {
  WsFrameReader r;
  r.Feed({});
  EXPECT_EQ(r.Next().kind, Kind::kNeedMore);
  r.Feed(ServerFrame(0x81, "x"));
  const auto it = r.Next();
  ASSERT_EQ(it.kind, Kind::kMessage);
  EXPECT_EQ(it.data, "x");
}

TEST(WsFrameReader, ManyFramesInOneRead) {
  std::string wire;
  for (int i = 0; i < 100; ++i) wire += ServerFrame(0x81, "m" + std::to_string(i));
  WsFrameReader r;
  char* p = r.Prepare(wire.size());
  ASSERT_GE(r.prepared(), wire.size());
  std::copy(wire.begin(), wire.end(), p);
  r.Commit(wire.size());
  const auto got = Messages(r);
  ASSERT_EQ(got.size(), 100u);
  EXPECT_EQ(got[0], "m0");
  EXPECT_EQ(got[99], "m99");
  EXPECT_EQ(r.Next().kind, Kind::kNeedMore);
}

// A read that ends inside a frame: the unparsed rest moves to the front
// before the next read, whatever the buffer held before it.
TEST(WsFrameReader, APartialFrameSurvivesTheNextRead) {
  const std::string first = ServerFrame(0x81, std::string(1000, 'a'));
  const std::string second = ServerFrame(0x81, std::string(3000, 'b'));
  const std::string wire = first + second;
  WsFrameReader r;
  const std::size_t cut = first.size() + 100;  // the first frame and part of the second
  r.Feed(std::string_view(wire).substr(0, cut));
  auto it = r.Next();
  ASSERT_EQ(it.kind, Kind::kMessage);
  EXPECT_EQ(it.data, std::string(1000, 'a'));
  EXPECT_EQ(r.Next().kind, Kind::kNeedMore);
  // More than is free after the parsed bytes: the rest is moved, then grown.
  char* p = r.Prepare(64 * 1024);
  const std::string rest = wire.substr(cut);
  std::copy(rest.begin(), rest.end(), p);
  r.Commit(rest.size());
  it = r.Next();
  ASSERT_EQ(it.kind, Kind::kMessage);
  EXPECT_EQ(it.data, std::string(3000, 'b'));
  EXPECT_EQ(r.Next().kind, Kind::kNeedMore);
}

TEST(WsFrameReader, FragmentsJoinAroundAPing) {
  WsFrameReader r;
  r.Feed(ServerFrame(0x01, "ab") + ServerFrame(0x89, "p") + ServerFrame(0x00, "cd") +
         ServerFrame(0x80, "ef"));
  auto it = r.Next();
  ASSERT_EQ(it.kind, Kind::kPing);
  EXPECT_EQ(it.data, "p");
  it = r.Next();
  ASSERT_EQ(it.kind, Kind::kMessage);
  EXPECT_EQ(it.data, "abcdef");
}

TEST(WsFrameReader, CloseCodeAndReason) {
  WsFrameReader r;
  r.Feed(ServerFrame(0x88, std::string("\x03\xf0", 2) + "slow consumer"));
  const auto it = r.Next();
  ASSERT_EQ(it.kind, Kind::kClose);
  EXPECT_EQ(it.close_code, 1008);
  EXPECT_EQ(it.data, "slow consumer");
  WsFrameReader empty;
  empty.Feed(ServerFrame(0x88, ""));
  const auto bare = empty.Next();
  EXPECT_EQ(bare.kind, Kind::kClose);
  EXPECT_EQ(bare.close_code, 0);
}

TEST(WsFrameReader, ProtocolErrorsStick) {
  struct Case {
    const char* name;
    std::string wire;
  };
  const Case cases[] = {
      {"masked", std::string("\x81\x81\x00\x00\x00\x00x", 7)},
      {"reserved opcode", ServerFrame(0x83, "x")},
      {"reserved bit", ServerFrame(0xC1, "x")},
      {"continuation alone", ServerFrame(0x80, "x")},
      {"long ping", ServerFrame(0x89, std::string(126, 'p'))},
      {"fragmented ping", ServerFrame(0x09, "p")},
      {"message in fragments", ServerFrame(0x01, "a") + ServerFrame(0x81, "b")},
      {"over the limit", ServerFrame(0x81, std::string(65, 'x'))},
      {"one-byte close", ServerFrame(0x88, "x")},
  };
  for (const Case& c : cases) {
    WsFrameReader r(64);
    r.Feed(c.wire);
    auto it = r.Next();
    EXPECT_EQ(it.kind, Kind::kError) << c.name;
    EXPECT_FALSE(r.error().empty()) << c.name;
    r.Feed(ServerFrame(0x81, "fine"));
    EXPECT_EQ(r.Next().kind, Kind::kError) << c.name << ": stays in error";
  }
}

TEST(WsClientFrame, MaskedAndRoundTrips) {
  for (const std::size_t n :
       {std::size_t{0}, std::size_t{125}, std::size_t{126}, std::size_t{70'000}}) {
    std::string payload(n, '\0');
    for (std::size_t i = 0; i < n; ++i) payload[i] = static_cast<char>(i * 7);
    const std::string f = WsClientFrame(0xA, payload);
    ASSERT_GE(f.size(), 6u);
    EXPECT_EQ(static_cast<unsigned char>(f[0]), 0x8A);
    EXPECT_NE(static_cast<unsigned char>(f[1]) & 0x80, 0) << "clients mask every frame";
    const std::size_t header = n < 126 ? 2 : n <= 0xFFFF ? 4 : 10;
    ASSERT_EQ(f.size(), header + 4 + n);
    const auto* key = reinterpret_cast<const unsigned char*>(f.data() + header);
    std::string unmasked(n, '\0');
    for (std::size_t i = 0; i < n; ++i) {
      unmasked[i] = static_cast<char>(static_cast<unsigned char>(f[header + 4 + i]) ^ key[i % 4]);
    }
    EXPECT_EQ(unmasked, payload) << n;
  }
}

}  // namespace
}  // namespace mb::load
