// The load generator's WebSocket reader: frames from a server (RFC 6455,
// unmasked) taken straight out of the bytes a socket read returned, many
// per read, with no per-message handler, executor or allocation. A
// subscriber reading a market's streams at hundreds of thousands of
// messages a second spends its time here instead of in a composed read
// operation per message.
//
// Feed() the bytes as they arrive (any split); Next() returns what the next
// complete frame means, or kNeedMore. Fragmented messages are joined. A
// masked frame, a reserved bit or opcode, a control frame over 125 bytes or
// a fragmented one, and a message over the limit are protocol errors
// (kError, error() says which); after one the reader stays in error.
//
// Not thread-safe: one reader per connection, on its strand.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mb::load {

class WsFrameReader {
 public:
  enum class Kind : uint8_t { kNeedMore, kMessage, kPing, kPong, kClose, kError };
  struct Item {
    Kind kind = Kind::kNeedMore;
    // kMessage: the whole message; kPing/kPong: the payload; kClose: the
    // reason. Valid until the next call of Next(), Prepare() or Feed().
    std::string_view data;
    uint16_t close_code = 0;  // kClose: 0 when the frame had none
  };

  explicit WsFrameReader(std::size_t max_message_bytes = 16u << 20)
      : max_message_(max_message_bytes) {}

  // Where the next socket read may write (at least `min` bytes), and how
  // many it wrote.
  char* Prepare(std::size_t min);
  std::size_t prepared() const noexcept { return buf_.size() - end_; }
  void Commit(std::size_t n) noexcept { end_ += n; }
  // Copies bytes in (bytes that arrived before the reader took the socket).
  void Feed(std::string_view bytes);

  Item Next();
  const std::string& error() const noexcept { return error_; }

 private:
  Item Fail(std::string why);

  std::vector<char> buf_;
  std::size_t begin_ = 0, end_ = 0;  // unparsed bytes: buf_[begin_, end_)
  std::string partial_;              // a fragmented message so far
  bool in_fragments_ = false;
  const std::size_t max_message_;
  std::string error_;
};

// A client's masked frame (RFC 6455 5.3: clients mask every frame), e.g. a
// pong or a close; the mask key is fixed, which the protocol allows a test
// client to do.
std::string WsClientFrame(uint8_t opcode, std::string_view payload);

}  // namespace mb::load
