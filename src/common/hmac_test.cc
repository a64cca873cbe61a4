#include "common/hmac.h"

#include <gtest/gtest.h>

#include <string>

namespace mb {
namespace {

std::string Repeat(char c, std::size_t n) { return std::string(n, c); }

// The example of Binance's API documentation ("SIGNED endpoint examples").
TEST(HmacSha256Hex, BinanceDocumentationExample) {
  EXPECT_EQ(HmacSha256Hex("NhqPtmdSJYdKjVHjA7PZj4Mge3R5YNiP1e3UZjInClVN65XAbvqqM6A7H5fATj0j",
                          "symbol=LTCBTC&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=0.1&"
                          "recvWindow=5000&timestamp=1499827319559"),
            "c8db56825ae71d6d79447849e617115f4a920fa2acdcab2b053c4b2838bd6b71");
}

// RFC 4231 test cases 1-4, 6 and 7 (case 5 truncates the MAC).
TEST(HmacSha256Hex, Rfc4231Vectors) {
  std::string key4;
  for (char c = 1; c <= 25; ++c) key4.push_back(c);
  EXPECT_EQ(HmacSha256Hex(Repeat('\x0b', 20), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(HmacSha256Hex(Repeat('\xaa', 20), Repeat('\xdd', 50)),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  EXPECT_EQ(HmacSha256Hex(key4, Repeat('\xcd', 50)),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  EXPECT_EQ(
      HmacSha256Hex(Repeat('\xaa', 131), "Test Using Larger Than Block-Size Key - Hash Key First"),
      "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(HmacSha256Hex(Repeat('\xaa', 131),
                          "This is a test using a larger than block-size key and a larger than "
                          "block-size data. The key needs to be hashed before being used by the "
                          "HMAC algorithm."),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

// An empty key and empty data (a null key would make OpenSSL reuse an old one).
TEST(HmacSha256Hex, EmptyKeyAndData) {
  EXPECT_EQ(HmacSha256Hex("", ""),
            "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            HmacSha256Hex("Jefe", "what do ya want for nothing?"));
  EXPECT_EQ(HmacSha256Hex("", "x").size(), 64u);
}

}  // namespace
}  // namespace mb
