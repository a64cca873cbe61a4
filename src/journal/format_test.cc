// Tests of the journal's framing: the segment header and record frame byte
// by byte, every single-byte damage of a header, file names, and decoding a
// record back into events.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <array>
#include <cstring>
#include <string>

#include "support/journal_test_support.h"

namespace mb::journal {
namespace {

TEST(JournalFormat, SegmentHeaderLayoutAndEverySingleByteDamage) {
  std::array<std::byte, kSegmentHeaderSize> b{};
  EncodeSegmentHeader({kSegmentFormatVersion, 42, 0x1122334455667788}, b);
  EXPECT_EQ(std::memcmp(b.data(), "MBJRNL01", 8), 0);
  EXPECT_EQ(GetU16(b.data() + 8), 5u);
  EXPECT_EQ(GetU16(b.data() + 10), 40u);
  EXPECT_EQ(GetU32(b.data() + 12), 0u);
  EXPECT_EQ(GetU64(b.data() + 16), 42u);
  EXPECT_EQ(GetU64(b.data() + 24), 0x1122334455667788u);
  EXPECT_EQ(GetU64(b.data() + 32), XXH3_64bits(b.data(), 32));
  auto h = DecodeSegmentHeader(b, "seg");
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->version, 5u);
  EXPECT_EQ(h->first_seq, 42u);
  EXPECT_EQ(h->config_hash, 0x1122334455667788u);

  // Versions 1 (before the codec's additions), 2 (before the transfers to
  // other venues), 3 (before the conditional orders, icebergs and order
  // lists) and 4 (before the accounts and API keys) are still read; 0 and 6
  // are not.
  for (uint16_t version :
       {uint16_t{0}, uint16_t{1}, uint16_t{2}, uint16_t{3}, uint16_t{4}, uint16_t{6}}) {
    std::array<std::byte, kSegmentHeaderSize> other{};
    EncodeSegmentHeader({version, 42, 0x1122334455667788}, other);
    auto o = DecodeSegmentHeader(other, "seg");
    EXPECT_EQ(o.ok(), version >= 1 && version <= 4) << version;
    if (o.ok()) {
      EXPECT_EQ(o->version, version);
    } else {
      EXPECT_HAS(o.status().message(), "reads versions 1 to 5");
      EXPECT_HAS(o.status().message(), "version " + std::to_string(version));
    }
  }

  for (std::size_t i = 0; i < b.size(); ++i) {
    auto damaged = b;
    damaged[i] ^= std::byte{0x04};
    auto d = DecodeSegmentHeader(damaged, "seg");
    EXPECT_FALSE(d.ok()) << "byte " << i;
    EXPECT_EQ(d.status().code(), StatusCode::kCorruption) << "byte " << i;
  }
  auto shorter = DecodeSegmentHeader(std::span(b).first(39), "seg");
  EXPECT_EQ(shorter.status().code(), StatusCode::kCorruption);
}

TEST(JournalFormat, RecordFrameAndItsErrors) {
  const History h = MakeHistory(3, 20);
  const Bytes payload = Encoded(h.records[19]);
  Bytes rec(kRecordHeaderSize + payload.size());
  std::copy(payload.begin(), payload.end(), rec.begin() + kRecordHeaderSize);
  EncodeRecordHeader(RecordType::kCommandOutcome, 20, payload,
                     std::span<std::byte, kRecordHeaderSize>(rec.data(), kRecordHeaderSize));
  EXPECT_EQ(GetU32(rec.data()), payload.size());
  EXPECT_EQ(rec[4], std::byte{1});
  EXPECT_EQ(rec[5], std::byte{0});
  EXPECT_EQ(rec[6], std::byte{0});
  EXPECT_EQ(rec[7], std::byte{0});
  EXPECT_EQ(GetU64(rec.data() + 8), 20u);
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  XXH3_64bits_update(st, rec.data(), 16);
  XXH3_64bits_update(st, payload.data(), payload.size());
  EXPECT_EQ(GetU64(rec.data() + 16), XXH3_64bits_digest(st));
  XXH3_freeState(st);

  ParsedRecord ok = ParseRecord(rec);
  ASSERT_EQ(ok.error, RecordError::kOk);
  EXPECT_EQ(ok.size, rec.size());
  EXPECT_EQ(ok.header.seq, 20u);
  // Trailing bytes are the next record's business.
  Bytes longer = rec;
  longer.resize(rec.size() + 7);
  EXPECT_EQ(ParseRecord(longer).error, RecordError::kOk);

  EXPECT_EQ(ParseRecord(std::span(rec).first(kRecordHeaderSize - 1)).error,
            RecordError::kShortHeader);
  EXPECT_EQ(ParseRecord(std::span(rec).first(rec.size() - 1)).error, RecordError::kShortPayload);
  Bytes bad;
  for (std::size_t reserved : {5u, 6u, 7u}) {
    bad = rec;
    bad[reserved] = std::byte{1};
    EXPECT_EQ(ParseRecord(bad).error, RecordError::kBadLength) << "reserved byte " << reserved;
  }
  bad = rec;
  PutU32(bad.data(), kMaxRecordPayload + 1);
  EXPECT_EQ(ParseRecord(bad).error, RecordError::kBadLength);
  bad = rec;
  bad[kRecordHeaderSize + 3] ^= std::byte{0x80};
  EXPECT_EQ(ParseRecord(bad).error, RecordError::kBadChecksum);
  // A type this build does not know, with a checksum that matches.
  bad = rec;
  bad[4] = std::byte{2};
  PutU64(bad.data() + 16, RecordChecksum(std::span<const std::byte, 16>(bad.data(), 16), payload));
  EXPECT_EQ(ParseRecord(bad).error, RecordError::kUnknownType);
}

TEST(JournalFormat, FileNames) {
  EXPECT_EQ(SegmentFileName(42), "00000000000000000042.mbj");
  EXPECT_EQ(SnapshotFileName(18446744073709551615u), "18446744073709551615.mbs");
  uint64_t seq = 0;
  EXPECT_TRUE(ParseSegmentFileName("00000000000000000042.mbj", &seq));
  EXPECT_EQ(seq, 42u);
  EXPECT_TRUE(ParseSnapshotFileName("00000000000000001000.mbs", &seq));
  EXPECT_EQ(seq, 1000u);
  for (const char* bad : {"42.mbj", "0000000000000000004x.mbj", "00000000000000000042.mbs",
                          "00000000000000000042.mbj.tmp", "000000000000000000042.mbj",
                          "99999999999999999999.mbj", "notes.txt", ""}) {
    EXPECT_FALSE(ParseSegmentFileName(bad, &seq)) << bad;
  }
  EXPECT_FALSE(ParseSnapshotFileName("00000000000000000042.mbj", &seq));
  EXPECT_FALSE(ParseSnapshotFileName("00000000000000000042.mbs.tmp", &seq));
}

TEST(JournalFormat, DecodeOutcomeChecksTheRecord) {
  const History h = MakeHistory(3, 30);
  for (uint64_t s : {1u, 20u, 30u}) {
    const Bytes payload = Encoded(h.records[s - 1]);
    JournalRecord rec{s, 0, payload, nullptr, 0};
    EventBuffer out;
    ASSERT_OK(DecodeOutcome(rec, &out));
    EXPECT_EQ(Encoded(out), payload);

    rec.seq = s + 1;  // the events carry another sequence
    out.clear();
    EXPECT_EQ(DecodeOutcome(rec, &out).code(), StatusCode::kCorruption);
    rec.seq = s;
    const Bytes cut(payload.begin(), payload.end() - 1);  // not whole events
    rec.payload = cut;
    out.clear();
    const Status st = DecodeOutcome(rec, &out);
    EXPECT_EQ(st.code(), StatusCode::kCorruption);
    EXPECT_HAS(st.message(), "does not decode");
  }
  JournalRecord empty{5, 0, {}, nullptr, 0};
  EventBuffer out;
  EXPECT_EQ(DecodeOutcome(empty, &out).code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace mb::journal
