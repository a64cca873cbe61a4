// `matchbook secrets scrub` over a journal with archived segments and a
// snapshot: a revoked key's plain secret leaves every live and archived
// segment and every snapshot, the journal still replays from record 1 (the
// archive first) to each snapshot's state hash, a sealed key is untouched,
// and a live plain key refuses the scrub.
#include "app/secrets.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "gateway/sealed_secret.h"
#include "journal/archive.h"
#include "support/journal_test_support.h"

namespace mb::app {
namespace {

using journal::Bytes;
namespace fs = std::filesystem;

bool Holds(std::span<const std::byte> bytes, std::string_view text) {
  const std::string_view all(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return all.find(text) != std::string_view::npos;
}

class ScrubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.engine = journal::TestConfig();
    config_.runtime.data_dir = tmp_.path().string();
  }

  // Runs `c` as the next command; its events become the next record.
  void Run(const engine::CommandBody& body) {
    engine::EventBuffer out;
    engine_.Process(engine::Command{ts_ += 1'000, body}, &out);
    for (const engine::Event& e : out) {
      ASSERT_NE(e.type(), engine::EventType::kRejected) << "command " << records_.size() + 1;
    }
    records_.push_back(std::move(out));
  }
  engine::AuthChange Auth(engine::AuthChangeKind kind, uint32_t account, std::string_view subject,
                          std::string_view secret = {}) {
    engine::AuthChange c;
    c.kind = kind;
    c.account = AccountId{account};
    c.permissions = 3;
    c.created_ms = 1;
    EXPECT_TRUE(c.subject.Assign(subject));
    EXPECT_TRUE(c.secret.Assign(secret));
    return c;
  }
  // Every record in its own segment (a tiny segment size), a snapshot at
  // `snapshot_at`, then the segments before it archived (as retention does:
  // the oldest snapshot is its floor).
  void WriteJournal(uint64_t snapshot_at) {
    journal::History h;
    h.config = config_.engine;
    h.config_hash = engine_.ConfigHash();
    h.records = records_;
    ASSERT_TRUE(
        journal::WriteHistory(tmp_.path(), h, records_.size(), journal::Options(64), 1).ok());
    auto dir = journal::DataDir::Open(tmp_.path(), journal::OpenMode::kReadWrite);
    ASSERT_TRUE(dir.ok());
    engine::Engine at = journal::EngineAt(h, snapshot_at);
    auto scanned = journal::ReadAll(tmp_.path());
    ASSERT_TRUE(scanned.ok());
    journal::SnapshotMeta meta;
    meta.record_checksum = (*scanned)[snapshot_at - 1].checksum;
    ASSERT_TRUE(journal::WriteSnapshot(*dir, at.ExportImage(), &meta, 1, 10).ok());
    auto retained = journal::Retain(*dir, snapshot_at, journal::Retention::kArchive, archive());
    ASSERT_TRUE(retained.ok()) << retained.status().message();
    ASSERT_EQ(retained->segments, snapshot_at - 1);
  }
  fs::path archive() const { return tmp_.path() / "archive"; }
  // The stores derived from the journal: a SQL projection and the history store.
  std::vector<projection::StoreOptions> Stores() const {
    projection::StoreOptions sql;
    sql.backend = "sqlite";
    sql.path = (tmp_.path() / "projection.sqlite").string();
    projection::StoreOptions history;
    history.backend = "rocksdb";
    history.path = (tmp_.path() / "history").string();
    return {sql, history};
  }
  // Whether any live segment, archived segment (decompressed) or snapshot
  // image holds `secret`.
  bool Anywhere(std::string_view secret) {
    for (const fs::path& s : journal::Segments(tmp_.path())) {
      if (Holds(journal::Load(s), secret)) return true;
    }
    auto archived = journal::ListArchive(archive());
    EXPECT_TRUE(archived.ok());
    for (const journal::ArchivedSegment& a : *archived) {
      auto bytes = journal::ReadArchivedSegment(a.path);
      EXPECT_TRUE(bytes.ok());
      if (Holds(*bytes, secret)) return true;
    }
    for (const auto& e : fs::directory_iterator(tmp_.path() / "snapshots")) {
      auto loaded = journal::ReadSnapshot(e.path());
      EXPECT_TRUE(loaded.ok()) << loaded.status().message();
      for (const engine::ImageApiKey& k : loaded->image.api_keys) {
        if (k.secret.view() == secret) return true;
      }
    }
    return false;
  }

  // The journal replayed from record 1, the archive first, checking that the
  // snapshot at `snapshot_at` holds the replay's state hash and the checksum
  // of its record; the final state (nullopt on a scan error, reported).
  std::optional<engine::EngineImage> Replay(uint64_t snapshot_at, uint64_t* last = nullptr) {
    auto dir = journal::DataDir::Open(tmp_.path(), journal::OpenMode::kReadOnly);
    EXPECT_TRUE(dir.ok());
    if (!dir.ok()) return std::nullopt;
    engine::Engine replay(config_.engine);
    journal::ScanOptions so;
    so.archive_dir = archive();
    auto scanned = journal::ScanJournal(*dir, so, [&](const journal::JournalRecord& r) {
      engine::EventBuffer events;
      MB_RETURN_IF_ERROR(journal::DecodeOutcome(r, &events));
      for (const engine::Event& e : events) replay.Apply(e);
      if (last != nullptr) *last = r.seq;
      if (r.seq == snapshot_at) {
        auto snap =
            journal::ReadSnapshot(dir->snapshot_dir() / journal::SnapshotFileName(snapshot_at));
        EXPECT_TRUE(snap.ok());
        EXPECT_EQ(snap->meta.state_hash, replay.StateHash());
        EXPECT_EQ(snap->meta.record_checksum, r.checksum);
      }
      return Status::Ok();
    });
    EXPECT_TRUE(scanned.ok()) << scanned.status().message();
    if (!scanned.ok()) return std::nullopt;
    return replay.ExportImage();
  }

  journal::TempDir tmp_;
  Config config_;
  engine::Engine engine_{journal::TestConfig()};
  int64_t ts_ = 1'700'000'000'000'000'000;
  std::vector<engine::EventBuffer> records_;
};

TEST_F(ScrubTest, RevokedPlainSecretsLeaveTheArchiveTheJournalAndTheSnapshots) {
  const std::string plain(64, 'P');
  const std::string key(64, 'k');
  const gateway::MasterKey master = gateway::MasterKey::Generate();
  const std::string sealed_key(64, 's');
  const std::string sealed = master.Seal(sealed_key, gateway::NewRawSecret());
  using K = engine::AuthChangeKind;
  Run(Auth(K::kCreateAccount, 0, "alice"));
  Run(Auth(K::kCreateKey, 1, key, plain));
  Run(Auth(K::kCreateKey, 1, sealed_key, sealed));
  Run(Auth(K::kRevokeKey, 1, key));
  Run(Auth(K::kCreateAccount, 0, "bob"));
  WriteJournal(/*snapshot_at=*/4);
  ASSERT_TRUE(Anywhere(plain)) << "the test would see nothing";

  auto report = ScrubSecrets(config_, archive(), Stores());
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->secrets, 1U);
  EXPECT_EQ(report->records, 1U);
  EXPECT_EQ(report->archived_segments, 1U);
  EXPECT_EQ(report->snapshots, 1U);
  EXPECT_FALSE(report->stream_purged);
  EXPECT_FALSE(Anywhere(plain));
  EXPECT_TRUE(Anywhere(sealed)) << "a sealed secret is not scrubbed";

  // The journal, archive first, replays to the rewritten snapshot's hash.
  uint64_t last = 0;
  const std::optional<engine::EngineImage> replayed = Replay(4, &last);
  ASSERT_TRUE(replayed.has_value());
  EXPECT_EQ(last, 5U);
  const engine::EngineImage& image = *replayed;
  ASSERT_EQ(image.api_keys.size(), 2U);
  EXPECT_EQ(gateway::FormOf(image.api_keys[0].secret.view()), gateway::SecretForm::kScrubbed);
  EXPECT_TRUE(image.api_keys[0].revoked);
  EXPECT_EQ(image.api_keys[1].secret.view(), sealed);

  // Again: nothing left to do.
  auto again = ScrubSecrets(config_, archive(), Stores());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->secrets, 0U);
  EXPECT_EQ(again->records + again->snapshots, 0U);
}

// Every sealed secret, live and archived records and snapshots alike, is
// sealed again with the new master key, which then replaces the old one; the
// journal still replays to each snapshot; a run cut short runs again.
TEST_F(ScrubTest, RotatingTheMasterKeySealsEverySecretAgain) {
  const gateway::MasterKey old_key = gateway::MasterKey::Generate();
  const gateway::MasterKey new_key = gateway::MasterKey::Generate();
  const fs::path key_file = tmp_.path() / "master.key";
  const fs::path new_file = tmp_.path() / "new.key";
  ASSERT_TRUE(WriteFileAtomically(key_file, old_key.ToHex() + "\n", 0600).ok());
  ASSERT_TRUE(WriteFileAtomically(new_file, new_key.ToHex() + "\n", 0600).ok());
  const std::string k1(64, 'a'), k2(64, 'b');
  const std::string raw1 = gateway::NewRawSecret(), raw2 = gateway::NewRawSecret();
  const std::string s1 = old_key.Seal(k1, raw1), s2 = old_key.Seal(k2, raw2);
  using K = engine::AuthChangeKind;
  Run(Auth(K::kCreateAccount, 0, "alice"));
  Run(Auth(K::kCreateKey, 1, k1, s1));
  Run(Auth(K::kCreateAccount, 0, "bob"));
  Run(Auth(K::kCreateKey, 2, k2, s2));
  Run(Auth(K::kRevokeKey, 1, k1));
  WriteJournal(/*snapshot_at=*/4);
  ASSERT_TRUE(Anywhere(s1) && Anywhere(s2));
  const fs::path snapshot = tmp_.path() / "snapshots" / journal::SnapshotFileName(4);
  const journal::Bytes old_snapshot = journal::Load(snapshot);

  // The same key twice, and a key in use that opens nothing, are refused.
  EXPECT_FALSE(RotateMasterKey(config_, archive(), Stores(), key_file).ok());
  ASSERT_TRUE(
      WriteFileAtomically(key_file, gateway::MasterKey::Generate().ToHex() + "\n", 0600).ok());
  auto wrong = RotateMasterKey(config_, archive(), Stores(), new_file);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("opens with neither"), std::string::npos)
      << wrong.status().message();
  ASSERT_TRUE(WriteFileAtomically(key_file, old_key.ToHex() + "\n", 0600).ok());

  auto r = RotateMasterKey(config_, archive(), Stores(), new_file);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->secrets, 2U);
  EXPECT_EQ(r->archived_segments, 1U);  // k1's record; k2's (record 4) is live
  EXPECT_EQ(r->segments, 1U);
  EXPECT_EQ(r->snapshots, 1U);
  EXPECT_FALSE(Anywhere(s1));
  EXPECT_FALSE(Anywhere(s2));
  EXPECT_TRUE(Anywhere(new_key.Seal(k1, raw1)));
  EXPECT_TRUE(Anywhere(new_key.Seal(k2, raw2)));
  auto installed = gateway::LoadMasterKey(key_file);
  ASSERT_TRUE(installed.ok());
  EXPECT_EQ(installed->ToHex(), new_key.ToHex());

  // The journal, archive first, replays to the rewritten snapshot's hash.
  const std::optional<engine::EngineImage> replayed = Replay(4);
  ASSERT_TRUE(replayed.has_value());
  EXPECT_TRUE(gateway::CheckMasterKey(new_key, *replayed, key_file).ok());

  // Again, as after a run cut short before the key was installed: the
  // secrets the new key opens stay, and the key goes in.
  ASSERT_TRUE(WriteFileAtomically(key_file, old_key.ToHex() + "\n", 0600).ok());
  auto again = RotateMasterKey(config_, archive(), Stores(), new_file);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->secrets, 0U);
  EXPECT_EQ(again->records + again->snapshots, 0U);
  EXPECT_EQ(gateway::LoadMasterKey(key_file)->ToHex(), new_key.ToHex());

  // Cut short after the journal and before the snapshot: the snapshot holds
  // the old ciphertexts and the record checksum from before (recovery
  // refuses it). Run again, the snapshot is made the journal's.
  journal::Store(snapshot, old_snapshot);
  ASSERT_TRUE(WriteFileAtomically(key_file, old_key.ToHex() + "\n", 0600).ok());
  auto resumed = RotateMasterKey(config_, archive(), Stores(), new_file);
  ASSERT_TRUE(resumed.ok()) << resumed.status().message();
  EXPECT_EQ(resumed->snapshots, 1U);
  EXPECT_EQ(resumed->records, 0U);
  EXPECT_FALSE(Anywhere(s1));
  EXPECT_FALSE(Anywhere(s2));
  EXPECT_TRUE(Replay(4).has_value());
}

TEST_F(ScrubTest, ALivePlainKeyRefusesTheScrubAndNothingChanges) {
  const std::string plain(64, 'Q');
  using K = engine::AuthChangeKind;
  Run(Auth(K::kCreateAccount, 0, "alice"));
  Run(Auth(K::kCreateKey, 1, std::string(64, 'k'), plain));
  Run(Auth(K::kCreateAccount, 0, "bob"));
  Run(Auth(K::kCreateAccount, 0, "carol"));
  WriteJournal(/*snapshot_at=*/3);
  const auto before = journal::Tree(tmp_.path());
  auto report = ScrubSecrets(config_, archive(), Stores());
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("kkkkkkkk... (account 1)"), std::string::npos)
      << report.status().message();
  auto after = journal::Tree(tmp_.path());
  after.erase("LOCK");
  auto expected = before;
  expected.erase("LOCK");
  EXPECT_EQ(after, expected);
}

}  // namespace
}  // namespace mb::app
