// libFuzzer target for the codec: any bytes go to the command, event and image
// decoders. A decode must never read out of bounds (ASan) or misbehave (UBSan),
// and whatever decodes must be canonical: re-encoding gives back exactly the
// bytes it came from, and decoding that again re-encodes to the same bytes.
//
// Build and run: scripts/fuzz.sh [seconds]  (seeds in src/codec/fuzz_corpus/).

#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "codec/codec.h"

namespace {

using mb::codec::Decode;
using mb::codec::DecodeImage;
using mb::codec::DecodeResult;
using mb::codec::Encode;
using mb::codec::EncodeImage;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "codec_fuzz: %s\n", what);
  std::abort();
}

bool SameBytes(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

// Decodes records of type T back to back until one fails; checks each one.
template <class T, std::size_t kMax>
void CheckRecords(std::span<const std::byte> in) {
  while (!in.empty()) {
    T x;
    const DecodeResult r = Decode(in, &x);
    if (!r.ok()) {
      if (r.consumed != 0) Fail("a failed decode reported consumed bytes");
      return;
    }
    if (r.consumed == 0 || r.consumed > in.size() || r.consumed > kMax) {
      Fail("decode consumed a bad byte count");
    }
    std::byte buf[kMax];
    const std::size_t n = Encode(x, buf);
    if (n != r.consumed || n != mb::codec::EncodedSize(x)) Fail("re-encoded size differs");
    if (!SameBytes({buf, n}, in.first(n))) Fail("encoding is not canonical");
    T y;
    if (!Decode(std::span<const std::byte>(buf, n), &y).ok()) Fail("re-encoded record rejected");
    std::byte again[kMax];
    if (Encode(y, again) != n || !SameBytes({again, n}, {buf, n})) {
      Fail("decode(encode(x)) re-encodes differently");
    }
    in = in.subspan(r.consumed);
  }
}

void CheckImage(std::span<const std::byte> in) {
  auto image = DecodeImage(in);
  if (!image.ok()) {
    if (image.status().code() != mb::StatusCode::kCorruption)
      Fail("image error is not kCorruption");
    return;
  }
  const std::vector<std::byte> bytes = EncodeImage(*image);
  // An image of an older format version decodes into this one's layout: its
  // bytes are canonical once re-encoded, not before. Re-encoding only adds
  // the (empty) sections of the newer versions: the bytes after the version
  // stay as they were, then come zero counts, then a new checksum.
  const bool current = static_cast<uint16_t>(std::to_integer<uint16_t>(in[8]) |
                                             std::to_integer<uint16_t>(in[9]) << 8) ==
                       mb::codec::kImageFormatVersion;
  if (current && !SameBytes(bytes, in)) Fail("image encoding is not canonical");
  if (!current) {
    constexpr std::size_t kVersionEnd = 10;  // magic, version
    const std::size_t body = in.size() - 8;  // checksum excluded
    if (bytes.size() <= in.size()) Fail("older image did not grow when re-encoded");
    if (!SameBytes(std::span(bytes).subspan(kVersionEnd, body - kVersionEnd),
                   in.subspan(kVersionEnd, body - kVersionEnd))) {
      Fail("older image's sections changed when re-encoded");
    }
    for (std::size_t i = body; i < bytes.size() - 8; ++i) {
      if (bytes[i] != std::byte{0}) Fail("older image re-encoded with a non-empty new section");
    }
  }
  auto again = DecodeImage(bytes);
  if (!again.ok()) Fail("re-encoded image rejected");
  if (!SameBytes(EncodeImage(*again), bytes)) Fail("decode(encode(image)) re-encodes differently");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  CheckRecords<mb::engine::Command, mb::codec::kMaxCommandSize>(in);
  CheckRecords<mb::engine::Event, mb::codec::kMaxEventSize>(in);
  CheckImage(in);
  // The checksum stops almost every mutation at the door. Reseal a copy so the
  // structural checks behind it (counts, records, trailing bytes) get fuzzed too.
  if (size >= 8) {
    std::vector<std::byte> sealed(in.begin(), in.end());
    const std::size_t body = size - 8;
    const uint64_t sum = XXH3_64bits(sealed.data(), body);
    for (std::size_t i = 0; i < 8; ++i) sealed[body + i] = static_cast<std::byte>(sum >> (8 * i));
    CheckImage(sealed);
  }
  return 0;
}
