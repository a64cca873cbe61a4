// Deposit addresses and the calls between venues: what is accepted, what is
// refused and why.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "transfer/address.h"
#include "transfer/protocol.h"

namespace mb::transfer {
namespace {

TEST(AddressTest, RoundTripsAndNamesVenueAccountAsset) {
  const std::string a = MakeAddress("beta", AccountId{42}, "BTC");
  auto p = ParseAddress(a);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->venue, "beta");
  EXPECT_EQ(p->account, AccountId{42});
  EXPECT_EQ(p->asset, "BTC");
  EXPECT_EQ(a.rfind("beta:42:BTC:", 0), 0u) << a;
}

TEST(AddressTest, EveryOneCharacterTypoIsRefused) {
  const std::string a = MakeAddress("beta", AccountId{42}, "BTC");
  const std::string alphabet = "0123456789abcdefBTCEHUSDTx:-_";
  int refused = 0, tried = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    for (char c : alphabet) {
      if (c == a[i]) continue;
      std::string typo = a;
      typo[i] = c;
      ++tried;
      if (!ParseAddress(typo).ok()) ++refused;
    }
  }
  EXPECT_EQ(refused, tried);
}

TEST(AddressTest, RefusesMalformedAddresses) {
  for (const char* bad : {"", "beta", "beta:42:BTC", "beta:x:BTC:00000000", "beta:042:BTC:00000000",
                          ":42:BTC:00000000", "beta:42::00000000", "be ta:42:BTC:00000000",
                          "beta:99999999999:BTC:00000000"}) {
    EXPECT_FALSE(ParseAddress(bad).ok()) << bad;
  }
  const std::string good = MakeAddress("beta", AccountId{7}, "ETH");
  EXPECT_FALSE(ParseAddress(good + "0").ok());
  EXPECT_FALSE(ParseAddress(std::string(70, 'a')).ok());
}

TEST(ProtocolTest, SignatureDependsOnEveryPart) {
  const std::string s = Sign("secret-0123456789", "1700000000000", "POST", kDeliverTarget, "{}");
  EXPECT_EQ(s.size(), 64u);
  EXPECT_TRUE(SignatureMatches(s, s));
  EXPECT_FALSE(SignatureMatches(
      s, Sign("secret-0123456780", "1700000000000", "POST", kDeliverTarget, "{}")));
  EXPECT_FALSE(SignatureMatches(
      s, Sign("secret-0123456789", "1700000000001", "POST", kDeliverTarget, "{}")));
  EXPECT_FALSE(SignatureMatches(
      s, Sign("secret-0123456789", "1700000000000", "POST", kDeliverTarget, "[]")));
  EXPECT_FALSE(SignatureMatches(s, s.substr(1)));
}

TEST(ProtocolTest, DeliveriesAndResultsRoundTrip) {
  const std::vector<Delivery> d = {{7, "BTC", "0.5", "beta:1:BTC:00000000"},
                                   {8, "USDT", "10", "beta:2:USDT:00000000"}};
  auto back = DecodeDeliveries(EncodeDeliveries(d));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1].id, 8u);
  EXPECT_EQ((*back)[1].coin, "USDT");
  EXPECT_EQ((*back)[0].address, "beta:1:BTC:00000000");

  std::vector<DeliveryResult> r(3);
  r[0] = {7, Outcome::kCredited, 991, engine::RefundReason::kRefused, ""};
  r[1] = {8, Outcome::kRejected, 0, engine::RefundReason::kInvalidAddress, "no such account"};
  r[2] = {9, Outcome::kRetry, 0, engine::RefundReason::kRefused, "busy"};
  auto rb = DecodeResults(EncodeResults(r));
  ASSERT_TRUE(rb.ok()) << rb.status().message();
  ASSERT_EQ(rb->size(), 3u);
  EXPECT_EQ((*rb)[0].outcome, Outcome::kCredited);
  EXPECT_EQ((*rb)[0].deposit_id, 991u);
  EXPECT_EQ((*rb)[1].reason, engine::RefundReason::kInvalidAddress);
  EXPECT_EQ((*rb)[1].msg, "no such account");
  EXPECT_EQ((*rb)[2].outcome, Outcome::kRetry);
}

TEST(ProtocolTest, RefusesBadBodies) {
  for (const char* bad : {"", "not json", "[]", "{}", R"({"transfers":{}})", R"({"transfers":[]})",
                          R"({"transfers":[1]})",
                          R"({"transfers":[{"id":0,"coin":"BTC","amount":"1","address":"a"}]})",
                          R"({"transfers":[{"id":-3,"coin":"BTC","amount":"1","address":"a"}]})",
                          R"({"transfers":[{"id":3,"coin":"BTC","amount":1,"address":"a"}]})"}) {
    EXPECT_FALSE(DecodeDeliveries(bad).ok()) << bad;
  }
  // A destination cannot void: an answer saying so is a refusal.
  auto r = DecodeResults(R"({"results":[{"id":3,"status":"REJECTED","reason":"VOIDED"}]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].reason, engine::RefundReason::kRefused);
  EXPECT_FALSE(DecodeResults(R"({"results":[{"id":3,"status":"CREDITED"}]})").ok());
  EXPECT_FALSE(DecodeResults(R"({"results":[{"id":3,"status":"MAYBE"}]})").ok());
}

}  // namespace
}  // namespace mb::transfer
