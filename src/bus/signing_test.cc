// The bus key: signatures that bind a message to its stream and id, key
// files made 0600, verify keys in each form, nkey seeds.
#include "bus/signing.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "bus/nats.h"
#include "common/file.h"

namespace mb::bus {
namespace {

namespace fs = std::filesystem;

std::span<const std::byte> Bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

class SigningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mb_signing_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

BusVerifier VerifierOf(const Ed25519Key& key) {
  auto pub = Ed25519PublicKey::FromRaw(key.public_key());
  EXPECT_TRUE(pub.ok());
  return BusVerifier(*pub);
}

TEST_F(SigningTest, ASignatureCoversKindStreamIdAndEveryByte) {
  auto key = Ed25519Key::Generate();
  ASSERT_TRUE(key.ok());
  const BusSigner signer(*key);
  const BusVerifier verifier = VerifierOf(*key);
  const std::string body = "records 1..3";
  const std::string sig = signer.Sign(SignedKind::kJournal, "MATCHBOOK_a", "3", Bytes(body));
  EXPECT_TRUE(
      verifier.Verify(SignedKind::kJournal, "MATCHBOOK_a", "3", Bytes(body), sig.c_str()).ok());

  std::string changed = body;
  changed[0] = 'R';
  const Status altered =
      verifier.Verify(SignedKind::kJournal, "MATCHBOOK_a", "3", Bytes(changed), sig.c_str());
  EXPECT_EQ(altered.code(), StatusCode::kCorruption);
  EXPECT_NE(altered.message().find("does not verify"), std::string::npos) << altered.message();
  EXPECT_FALSE(
      verifier.Verify(SignedKind::kJournal, "MATCHBOOK_b", "3", Bytes(body), sig.c_str()).ok());
  EXPECT_FALSE(
      verifier.Verify(SignedKind::kJournal, "MATCHBOOK_a", "4", Bytes(body), sig.c_str()).ok());
  EXPECT_FALSE(
      verifier.Verify(SignedKind::kManifest, "MATCHBOOK_a", "3", Bytes(body), sig.c_str()).ok());

  const Status none =
      verifier.Verify(SignedKind::kJournal, "MATCHBOOK_a", "3", Bytes(body), nullptr);
  EXPECT_NE(none.message().find("no Mb-Sig header"), std::string::npos) << none.message();
  const Status garbage =
      verifier.Verify(SignedKind::kJournal, "MATCHBOOK_a", "3", Bytes(body), "not base64!");
  EXPECT_NE(garbage.message().find("not a base64 Ed25519 signature"), std::string::npos);

  auto other = Ed25519Key::Generate();
  ASSERT_TRUE(other.ok());
  const std::string forged =
      BusSigner(*other).Sign(SignedKind::kJournal, "MATCHBOOK_a", "3", Bytes(body));
  EXPECT_FALSE(
      verifier.Verify(SignedKind::kJournal, "MATCHBOOK_a", "3", Bytes(body), forged.c_str()).ok());
}

TEST_F(SigningTest, AKeyFileIsMadeOnceWith0600AndItsPublicHalfBeside) {
  const fs::path file = dir_ / "bus.key";
  auto missing = LoadSigningKey(file, /*create=*/false);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(file));

  auto made = LoadSigningKey(file, /*create=*/true);
  ASSERT_TRUE(made.ok()) << made.status().message();
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = LoadSigningKey(file, /*create=*/true);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->public_key(), made->public_key());  // not made anew

  auto pub = ReadFile(fs::path(file.string() + ".pub"));
  ASSERT_TRUE(pub.ok());
  const std::string hex(reinterpret_cast<const char*>(pub->data()), pub->size());
  EXPECT_EQ(hex, HexEncode(made->public_key()) + "\n");

  // Every form of verify key gives the same raw key.
  for (const std::string& form :
       {hex, HexEncode(made->public_key()), file.string() + ".pub", file.string()}) {
    auto raw = ParseVerifyKey(form);
    ASSERT_TRUE(raw.ok()) << form << ": " << raw.status().message();
    EXPECT_EQ(*raw, made->public_key()) << form;
  }
  auto bad = ParseVerifyKey("abcd");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("verify_key"), std::string::npos);

  // A key file others can read is refused, with what to do.
  ASSERT_EQ(::chmod(file.c_str(), 0644), 0);
  auto open = LoadSigningKey(file, /*create=*/false);
  EXPECT_EQ(open.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(open.status().message().find("chmod 600"), std::string::npos);

  // Not a key: said so.
  const fs::path junk = dir_ / "junk.key";
  ASSERT_TRUE(WriteFileAtomically(junk, std::string_view("hello"), 0600).ok());
  auto not_key = LoadSigningKey(junk, /*create=*/false);
  EXPECT_EQ(not_key.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(not_key.status().message().find("signing_key_file"), std::string::npos);
}

TEST_F(SigningTest, AnOpenSslMadeKeyIsTaken) {
  const fs::path file = dir_ / "ossl.key";
  const std::string cmd =
      "openssl genpkey -algorithm ed25519 -out '" + file.string() + "' 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  ASSERT_EQ(::chmod(file.c_str(), 0600), 0);
  auto key = LoadSigningKey(file, /*create=*/false);
  ASSERT_TRUE(key.ok()) << key.status().message();
  EXPECT_EQ(key->public_key().size(), kEd25519KeyBytes);
}

TEST(Sha256Test, KnownDigest) {
  const std::string abc = "abc";
  EXPECT_EQ(Sha256::Hex(Bytes(abc)),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(NkeyTest, ThePublicKeyOfAUserSeed) {
  // The pair NATS's documentation shows for `nk -gen user -pubout`.
  auto pub = NkeyPublicFromSeed("SUACSSL3UAHUDXKFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3VY");
  ASSERT_TRUE(pub.ok()) << pub.status().message();
  EXPECT_EQ(*pub, "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4");
  // One character changed: the checksum says so.
  EXPECT_FALSE(
      NkeyPublicFromSeed("SUACSSL3UAHUDXLFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3VY").ok());
  EXPECT_FALSE(NkeyPublicFromSeed("not a seed").ok());
}

TEST(NatsSecurityTest, ContradictionsAndMissingFilesNameTheKey) {
  NatsSecurity s;
  EXPECT_TRUE(CheckNatsSecurity(s).ok());
  s.creds_file = "/nonexistent/user.creds";
  Status st = CheckNatsSecurity(s);
  EXPECT_NE(st.message().find("[bus] creds_file"), std::string::npos) << st.message();
  s = {};
  s.tls_cert_file = "/etc/hostname";
  st = CheckNatsSecurity(s);
  EXPECT_NE(st.message().find("tls_key_file"), std::string::npos) << st.message();
  s = {};
  s.user = "pub";
  st = CheckNatsSecurity(s);
  EXPECT_NE(st.message().find("password_file"), std::string::npos) << st.message();
  s = {};
  s.token_file = "/etc/hostname";
  s.nkey_seed_file = "/etc/hostname";
  st = CheckNatsSecurity(s);
  EXPECT_NE(st.message().find("one credential"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace mb::bus
