#include "common/ws_frame.h"

namespace mb {

std::size_t EncodeWsFrameHeader(uint8_t opcode, bool masked, uint64_t payload_size, char* out) {
  const auto mask = static_cast<unsigned char>(masked ? 0x80 : 0);
  std::size_t n = 0;
  out[n++] = static_cast<char>(0x80 | (opcode & 0x0F));  // FIN
  if (payload_size < 126) {
    out[n++] = static_cast<char>(mask | payload_size);
  } else if (payload_size <= 0xFFFF) {
    out[n++] = static_cast<char>(mask | 126);
    out[n++] = static_cast<char>(payload_size >> 8);
    out[n++] = static_cast<char>(payload_size & 0xFF);
  } else {
    out[n++] = static_cast<char>(mask | 127);
    for (int shift = 56; shift >= 0; shift -= 8) {
      out[n++] = static_cast<char>((payload_size >> shift) & 0xFF);
    }
  }
  return n;
}

}  // namespace mb
