// The first bytes of a WebSocket frame (RFC 6455 5.2), shared by the server,
// which writes its data frames itself, and the load generator's client
// frames.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mb {

// The longest header EncodeWsFrameHeader writes (the mask key not included).
inline constexpr std::size_t kMaxWsFrameHeader = 10;

// FIN and `opcode`, the mask bit, and the payload length in its shortest
// form (7, 16 or 64 bits). Writes up to kMaxWsFrameHeader bytes to `out` and
// returns how many; a masked frame's 4-byte key follows them.
std::size_t EncodeWsFrameHeader(uint8_t opcode, bool masked, uint64_t payload_size, char* out);

}  // namespace mb
