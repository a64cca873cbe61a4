#include "load/ws_frames.h"

#include <cstring>
#include <utility>

#include "common/ws_frame.h"

namespace mb::load {

namespace {
constexpr uint8_t kContinuation = 0x0, kText = 0x1, kBinary = 0x2, kClose = 0x8, kPing = 0x9,
                  kPong = 0xA;
constexpr std::size_t kMaxControl = 125;
}  // namespace

char* WsFrameReader::Prepare(std::size_t min) {
  if (begin_ == end_) begin_ = end_ = 0;
  if (buf_.size() - end_ < min) {
    // Move what is left to the front before growing.
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (buf_.size() - end_ < min) buf_.resize(end_ + min);
  }
  return buf_.data() + end_;
}

void WsFrameReader::Feed(std::string_view bytes) {
  if (bytes.empty()) return;  // memcpy's pointers may not be null, even for 0 bytes
  std::memcpy(Prepare(bytes.size()), bytes.data(), bytes.size());
  Commit(bytes.size());
}

WsFrameReader::Item WsFrameReader::Fail(std::string why) {
  error_ = std::move(why);
  begin_ = end_;
  return {Kind::kError, error_, 0};
}

WsFrameReader::Item WsFrameReader::Next() {
  for (;;) {
    if (!error_.empty()) return {Kind::kError, error_, 0};
    const auto* p = reinterpret_cast<const unsigned char*>(buf_.data() + begin_);
    const std::size_t have = end_ - begin_;
    if (have < 2) return {};
    const bool fin = (p[0] & 0x80) != 0;
    const uint8_t opcode = p[0] & 0x0F;
    if ((p[0] & 0x70) != 0) return Fail("reserved bits set");
    if ((p[1] & 0x80) != 0) return Fail("masked frame from the server");
    uint64_t len = p[1] & 0x7F;
    std::size_t header = 2;
    if (len == 126) {
      if (have < 4) return {};
      len = (uint64_t{p[2]} << 8) | p[3];
      header = 4;
    } else if (len == 127) {
      if (have < 10) return {};
      len = 0;
      for (int i = 0; i < 8; ++i) len = (len << 8) | p[2 + i];
      header = 10;
    }
    const bool control = (opcode & 0x8) != 0;
    if (control && (len > kMaxControl || !fin)) return Fail("bad control frame");
    if (!control && len > max_message_) return Fail("message over the limit");
    if (have - header < len) return {};
    const std::string_view payload(buf_.data() + begin_ + header, static_cast<std::size_t>(len));
    begin_ += header + static_cast<std::size_t>(len);
    switch (opcode) {
      case kText:
      case kBinary:
        if (in_fragments_) return Fail("new message inside a fragmented one");
        if (fin) return {Kind::kMessage, payload, 0};
        in_fragments_ = true;
        partial_.assign(payload);
        continue;
      case kContinuation:
        if (!in_fragments_) return Fail("continuation without a message");
        if (partial_.size() + payload.size() > max_message_) return Fail("message over the limit");
        partial_.append(payload);
        if (!fin) continue;
        in_fragments_ = false;
        return {Kind::kMessage, partial_, 0};
      case kPing:
        return {Kind::kPing, payload, 0};
      case kPong:
        return {Kind::kPong, payload, 0};
      case kClose: {
        if (payload.size() == 1) return Fail("close frame of one byte");
        if (payload.empty()) return {Kind::kClose, {}, 0};
        const auto* c = reinterpret_cast<const unsigned char*>(payload.data());
        return {Kind::kClose, payload.substr(2), static_cast<uint16_t>((c[0] << 8) | c[1])};
      }
      default:
        return Fail("reserved opcode " + std::to_string(opcode));
    }
  }
}

std::string WsClientFrame(uint8_t opcode, std::string_view payload) {
  constexpr unsigned char kKey[4] = {0x6d, 0x62, 0x6c, 0x64};
  char header[kMaxWsFrameHeader];
  const std::size_t n = EncodeWsFrameHeader(opcode, true, payload.size(), header);
  std::string f;
  f.reserve(n + 4 + payload.size());
  f.append(header, n);
  f.append(reinterpret_cast<const char*>(kKey), 4);
  for (std::size_t i = 0; i < payload.size(); ++i) {
    f.push_back(static_cast<char>(static_cast<unsigned char>(payload[i]) ^ kKey[i % 4]));
  }
  return f;
}

}  // namespace mb::load
