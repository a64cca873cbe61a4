// Accounts and API keys through the engine (AuthChange): ids in order, names
// and keys unique, revocations; every reject changes nothing, and replay and
// restore rebuild the same store (EngineTest's TearDown checks both).
#include <gtest/gtest.h>

#include <string>

#include "common/strong.h"
#include "engine/command.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/types.h"
#include "support/engine_test_support.h"

namespace mb::engine {
namespace {

AuthChange NewAccount(std::string_view name, int64_t created_ms = 1'000) {
  AuthChange c;
  c.kind = AuthChangeKind::kCreateAccount;
  c.created_ms = created_ms;
  EXPECT_TRUE(c.subject.Assign(name));
  return c;
}

AuthChange NewKey(uint32_t account, std::string_view key, std::string_view secret,
                  bool ed25519 = false) {
  AuthChange c;
  c.kind = AuthChangeKind::kCreateKey;
  c.account = AccountId{account};
  c.permissions = 3;
  c.ed25519 = ed25519;
  c.created_ms = 2'000;
  EXPECT_TRUE(c.subject.Assign(key));
  EXPECT_TRUE(c.secret.Assign(secret));
  return c;
}

AuthChange Revoke(std::string_view key) {
  AuthChange c;
  c.kind = AuthChangeKind::kRevokeKey;
  EXPECT_TRUE(c.subject.Assign(key));
  return c;
}

class AuthTest : public EngineTest {};

TEST_F(AuthTest, AccountsTakeTheNextIdAndKeepTheirNames) {
  Events ev = Run(NewAccount("alice", 1'234));
  ASSERT_EQ(Types(ev), "AuthChanged");
  EXPECT_EQ(At<AuthChanged>(ev, 0).account, AccountId{1});
  EXPECT_EQ(At<AuthChanged>(ev, 0).created_ms, 1'234);
  AuthChange bob = NewAccount("bob");
  bob.account = AccountId{9};  // ignored: the engine chooses
  ev = Run(bob);
  EXPECT_EQ(At<AuthChanged>(ev, 0).account, AccountId{2});
  const EngineImage img = engine_.ExportImage();
  ASSERT_EQ(img.accounts.size(), 2u);
  EXPECT_EQ(img.accounts[0].name.view(), "alice");
  EXPECT_EQ(img.accounts[1].id, AccountId{2});
  EXPECT_EQ(img.accounts[1].name.view(), "bob");
}

TEST_F(AuthTest, RejectsWithoutChangingAnything) {
  Run(NewAccount("alice"));
  ExpectReject(NewAccount("alice"), RejectReason::kNameTaken);
  ExpectReject(NewAccount(""), RejectReason::kInvalidAuthChange);
  ExpectReject(NewKey(2, "k1", "s1"), RejectReason::kUnknownAccount);
  ExpectReject(NewKey(0, "k1", "s1"), RejectReason::kUnknownAccount);  // the fee account
  ExpectReject(NewKey(1, "", "s1"), RejectReason::kInvalidAuthChange);
  ExpectReject(NewKey(1, "k1", ""), RejectReason::kInvalidAuthChange);
  Run(NewKey(1, "k1", "s1"));
  ExpectReject(NewKey(1, "k1", "s2"), RejectReason::kKeyTaken);
  Run(NewKey(1, "k2", "PUBLIC", /*ed25519=*/true));
  ExpectReject(NewKey(1, "k3", "PUBLIC", /*ed25519=*/true), RejectReason::kKeyTaken);
  ExpectReject(Revoke("nope"), RejectReason::kUnknownApiKey);
  AuthChange odd = NewAccount("carol");
  odd.kind = static_cast<AuthChangeKind>(9);
  ExpectReject(odd, RejectReason::kInvalidAuthChange);
}

TEST_F(AuthTest, AccountIdsStopBelowMaxAccounts) {
  // max_accounts is 16 here: ids 1..15 (0 is the fee account).
  for (int i = 1; i <= 15; ++i) Run(NewAccount("a" + std::to_string(i)));
  ExpectReject(NewAccount("one-more"), RejectReason::kNoAccountIdLeft);
}

TEST_F(AuthTest, KeysAreRecordedAndRevokedInOrder) {
  Run(NewAccount("alice"));
  Run(NewAccount("bob"));
  Run(NewKey(2, "kb", "sb"));
  Run(NewKey(1, "ka", "sa"));
  Events ev = Run(Revoke("kb"));
  ASSERT_EQ(Types(ev), "AuthChanged");
  EXPECT_EQ(At<AuthChanged>(ev, 0).account, AccountId{2});  // named for the journal's reader
  EXPECT_TRUE(At<AuthChanged>(ev, 0).secret.empty());
  // Revoking again is harmless: the key stays revoked.
  EXPECT_EQ(Types(Run(Revoke("kb"))), "AuthChanged");
  const EngineImage img = engine_.ExportImage();
  ASSERT_EQ(img.api_keys.size(), 2u);
  EXPECT_EQ(img.api_keys[0].key.view(), "kb");
  EXPECT_EQ(img.api_keys[0].secret.view(), "sb");
  EXPECT_TRUE(img.api_keys[0].revoked);
  EXPECT_EQ(img.api_keys[1].key.view(), "ka");
  EXPECT_FALSE(img.api_keys[1].revoked);
  EXPECT_EQ(img.api_keys[1].permissions, 3);
}

TEST_F(AuthTest, TheStoreIsPartOfTheStateHash) {
  Run(NewAccount("alice"));
  Engine other(config_);
  Events out;
  other.Process(Command{0, NewAccount("alicf")}, &out);
  EXPECT_NE(other.StateHash(), engine_.StateHash());
}

TEST_F(AuthTest, RestoreRefusesAnImpossibleStore) {
  Run(NewAccount("alice"));
  Run(NewKey(1, "ka", "sa"));
  EngineImage img = engine_.ExportImage();
  Engine e(config_);
  {
    EngineImage bad = img;
    bad.accounts[0].id = AccountId{2};  // ids start at 1
    EXPECT_FALSE(e.Restore(bad).ok());
  }
  {
    EngineImage bad = img;
    bad.accounts.push_back(bad.accounts[0]);  // a name twice
    bad.accounts[1].id = AccountId{2};
    EXPECT_FALSE(e.Restore(bad).ok());
  }
  {
    EngineImage bad = img;
    bad.api_keys[0].account = AccountId{2};  // no such account
    EXPECT_FALSE(e.Restore(bad).ok());
  }
  {
    EngineImage bad = img;
    bad.api_keys.push_back(bad.api_keys[0]);  // a key twice
    EXPECT_FALSE(e.Restore(bad).ok());
  }
  EXPECT_TRUE(e.Restore(img).ok());
  EXPECT_EQ(e.StateHash(), engine_.StateHash());
}

}  // namespace
}  // namespace mb::engine
