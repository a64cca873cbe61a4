// Assets and markets added at run time (AddAsset, AddMarket): the next id,
// the configuration file's checks, trading at once, the configuration hash of
// the start kept; every reject changes nothing, and replay and restore
// rebuild the added definitions (EngineTest's TearDown checks both).
#include "engine/listing.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>

#include "common/fixed_string.h"
#include "common/strong.h"
#include "engine/command.h"
#include "engine/engine.h"
#include "engine/event.h"
#include "engine/image.h"
#include "engine/market.h"
#include "engine/types.h"
#include "support/engine_test_support.h"

namespace mb::engine {
namespace {

constexpr AssetId kSol{3};
constexpr MarketId kSolUsdt{3};

AddAsset Asset(std::string_view symbol, int32_t scale) {
  AddAsset a;
  EXPECT_TRUE(a.symbol.Assign(symbol));
  a.scale = scale;
  return a;
}

// SOLUSDT: 0.01 USDT ticks, 0.00001 SOL lots (SOL has 9 decimals): a
// tick-lot is 10^6 × 10^4 / 10^9 = 10 USDT units.
AddMarket SolUsdt(std::string_view symbol = "SOLUSDT") {
  AddMarket m;
  EXPECT_TRUE(m.symbol.Assign(symbol));
  m.base = kSol;
  m.quote = kUsdt;
  m.tick_units = 1'000'000;
  m.lot_units = 10'000;
  m.min_qty = Qty{1};
  m.max_qty = Qty{1'000'000};
  m.max_price = Price{10'000'000};
  m.min_notional = Amount{0};
  m.maker_fee_bps = 5;
  m.taker_fee_bps = 10;
  return m;
}

class ListingTest : public FundedEngineTest {
 protected:
  void AddSol() {
    Events ev = Run(Asset("SOL", 9));
    ASSERT_EQ(Types(ev), "AssetAdded");
    EXPECT_EQ(At<AssetAdded>(ev, 0).asset, kSol);
  }
};

TEST_F(ListingTest, AnAssetTakesTheNextIdAndCanBeDeposited) {
  const uint64_t config_hash = engine_.ConfigHash();
  Events ev = Run(Asset("SOL", 9));
  ASSERT_EQ(Types(ev), "AssetAdded");
  const AssetAdded a = At<AssetAdded>(ev, 0);
  EXPECT_EQ(a.asset, kSol);
  EXPECT_EQ(a.symbol.view(), "SOL");
  EXPECT_EQ(a.scale, 9);
  ASSERT_EQ(engine_.config().assets.size(), 4u);
  EXPECT_EQ(engine_.config().assets[3].symbol, "SOL");
  // The configuration hash stays the start's: segments and snapshots keep
  // naming the configuration file's.
  EXPECT_EQ(engine_.ConfigHash(), config_hash);
  EXPECT_EQ(engine_.ConfigHash(), HashConfig(config_));
  // Existing balances are where they were; the new asset is empty, then
  // takes deposits.
  EXPECT_EQ(Bal(kAlice, kEth), B(kFundEth, 0));
  EXPECT_EQ(Bal(kBob, kUsdt), B(kFundUsdt, 0));
  EXPECT_EQ(Bal(kAlice, kSol), B(0, 0));
  Credit(kAlice, kSol, 5'000'000'000);
  EXPECT_EQ(Bal(kAlice, kSol), B(5'000'000'000, 0));
  EXPECT_EQ(engine_.supply(kSol), Amount{5'000'000'000});
  EXPECT_EQ(engine_.ExportImage().added_assets.size(), 1u);
}

TEST_F(ListingTest, AMarketTradesAtOnce) {
  AddSol();
  Events ev = Run(SolUsdt());
  ASSERT_EQ(Types(ev), "MarketAdded");
  const MarketAdded m = At<MarketAdded>(ev, 0);
  EXPECT_EQ(m.market, kSolUsdt);
  EXPECT_EQ(m.symbol.view(), "SOLUSDT");
  ASSERT_EQ(engine_.config().markets.size(), 4u);
  EXPECT_EQ(engine_.config().markets[3].notional_per_tick_lot, 10);  // derived, as Validate does
  EXPECT_EQ(engine_.market_status(kSolUsdt), MarketStatus::kTrading);

  Credit(kAlice, kSol, 10'000'000'000);  // 10 SOL
  // Alice sells 2 lots at 150 ticks; Bob buys them.
  Events sell = Place(Limit(kAlice, Side::kSell, 150, 2, TimeInForce::kGtc, kSolUsdt));
  ASSERT_EQ(Types(sell), "OrderAccepted OrderRested");
  EXPECT_EQ(Bal(kAlice, kSol), B(10'000'000'000 - 20'000, 20'000));
  Events buy = Place(Limit(kBob, Side::kBuy, 150, 2, TimeInForce::kGtc, kSolUsdt));
  const Trade t = One<Trade>(buy);
  EXPECT_EQ(t.market, kSolUsdt);
  EXPECT_EQ(t.price, Price{150});
  EXPECT_EQ(t.qty, Qty{2});
  EXPECT_EQ(t.notional, Amount{3'000});  // 150 × 2 × 10
  EXPECT_EQ(Bal(kBob, kSol).available.value, 20'000 - t.taker_fee.value);
  EXPECT_EQ(engine_.BestBid(kSolUsdt), std::nullopt);
}

TEST_F(ListingTest, AMarketAddedHaltedTradesOnceOpened) {
  AddSol();
  AddMarket halted = SolUsdt();
  halted.status = MarketStatus::kHalted;
  ASSERT_EQ(Types(Run(halted)), "MarketAdded");
  Credit(kAlice, kSol, 1'000'000'000);
  ExpectReject(Limit(kAlice, Side::kSell, 150, 1, TimeInForce::kGtc, kSolUsdt),
               RejectReason::kMarketNotTrading);
  ASSERT_EQ(Types(SetStatus(kSolUsdt, MarketStatus::kTrading)), "MarketStatusChanged");
  EXPECT_EQ(Types(Place(Limit(kAlice, Side::kSell, 150, 1, TimeInForce::kGtc, kSolUsdt))),
            "OrderAccepted OrderRested");
  // The image keeps the status the market was added with and the one it has.
  const EngineImage img = engine_.ExportImage();
  ASSERT_EQ(img.added_markets.size(), 1u);
  EXPECT_EQ(img.added_markets[0].status, MarketStatus::kHalted);
  EXPECT_EQ(img.market_status[3], MarketStatus::kTrading);
}

TEST_F(ListingTest, ASymbolTakenIsRefused) {
  ExpectReject(Asset("BTC", 8), RejectReason::kSymbolTaken);
  AddSol();
  ExpectReject(Asset("SOL", 6), RejectReason::kSymbolTaken);
  AddMarket btc = SolUsdt("BTCUSDT");
  ExpectReject(btc, RejectReason::kSymbolTaken);
  ASSERT_EQ(Types(Run(SolUsdt())), "MarketAdded");
  ExpectReject(SolUsdt(), RejectReason::kSymbolTaken);
}

TEST_F(ListingTest, WhatTheConfigurationFileWouldRefuseIsRefused) {
  ExpectReject(Asset("", 8), RejectReason::kInvalidListing);
  ExpectReject(Asset("sol", 8), RejectReason::kInvalidListing);
  ExpectReject(Asset("SOL", 19), RejectReason::kInvalidListing);
  ExpectReject(Asset("SOL", -1), RejectReason::kInvalidListing);
  AddSol();

  const auto refused = [&](AddMarket m) { ExpectReject(m, RejectReason::kInvalidListing); };
  AddMarket m = SolUsdt();
  m.base = AssetId{4};  // SOL is asset 3 now: 4 does not exist
  refused(m);
  m = SolUsdt();
  m.quote = kSol;  // base == quote
  refused(m);
  m = SolUsdt();
  m.lot_units = 1;  // a tick × lot of 10^6 / 10^9: not a whole quote unit
  refused(m);
  m = SolUsdt();
  m.tick_units = 0;
  refused(m);
  m = SolUsdt();
  m.max_qty = Qty{0};  // below min_qty
  refused(m);
  m = SolUsdt();
  m.max_price = Price{kInt64Max};  // max_price × max_qty × npt overflows
  refused(m);
  m = SolUsdt();
  m.taker_fee_bps = 10'001;
  refused(m);
  m = SolUsdt();
  m.status = static_cast<MarketStatus>(7);
  refused(m);
  m = SolUsdt("");
  refused(m);
  EXPECT_EQ(engine_.config().markets.size(), 3u);
}

// The same checks give the operator API its message, before anything is
// journaled.
TEST(ListingChecks, MessagesNameTheNewEntry) {
  EngineConfig c = MakeConfig();
  AssetSpec sol{"SOL", 9};
  EXPECT_TRUE(ValidateNewAsset(c, sol).ok());
  AssetSpec taken{"ETH", 8};
  Status s = ValidateNewAsset(c, taken);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "assets[3] (ETH).symbol: duplicate of assets[2]");
  AssetSpec long_symbol{std::string(33, 'A'), 8};
  s = ValidateNewAsset(c, long_symbol);
  EXPECT_NE(s.message().find("longer than 32"), std::string::npos) << s.message();

  c.assets.push_back(sol);
  MarketSpec m;
  m.symbol = "SOLUSDT";
  m.base = AssetId{3};
  m.quote = kUsdt;
  m.tick_units = 1'000'000;
  m.lot_units = 1;
  m.max_qty = Qty{10};
  m.max_price = Price{10};
  s = ValidateNewMarket(c, &m);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind("markets[3] (SOLUSDT).lot_units: ", 0), 0u) << s.message();
  m.lot_units = 10'000;
  s = ValidateNewMarket(c, &m);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(m.notional_per_tick_lot, 10);
}

TEST_F(ListingTest, AnImageCarriesWhatWasAdded) {
  AddSol();
  ASSERT_EQ(Types(Run(SolUsdt())), "MarketAdded");
  Credit(kAlice, kSol, 1'000'000'000);
  Place(Limit(kAlice, Side::kSell, 150, 3, TimeInForce::kGtc, kSolUsdt));
  const EngineImage img = engine_.ExportImage();
  ASSERT_EQ(img.added_assets.size(), 1u);
  ASSERT_EQ(img.added_markets.size(), 1u);
  EXPECT_EQ(img.config_hash, HashConfig(config_));

  Engine restored(config_);
  Status s = restored.Restore(img);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(restored.config().markets.size(), 4u);
  EXPECT_EQ(restored.config().markets[3].symbol, "SOLUSDT");
  EXPECT_EQ(restored.balance(kAlice, kSol), engine_.balance(kAlice, kSol));
  EXPECT_EQ(restored.Depth(kSolUsdt, Side::kSell, 10).size(), 1u);
  EXPECT_EQ(restored.StateHash(), engine_.StateHash());

  // The engine that grew restores its own image (as a restarted exchange's
  // snapshot follower does from start_config()).
  EXPECT_EQ(engine_.start_config().markets.size(), 3u);
  Engine copy(engine_.start_config());
  s = copy.Restore(img);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(copy.StateHash(), engine_.StateHash());
  s = engine_.Restore(img);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(engine_.StateHash(), copy.StateHash());
  EXPECT_EQ(engine_.config().markets.size(), 4u);

  // A definition the checks refuse, or ids that skip, and nothing loads.
  EngineImage bad = img;
  bad.added_markets[0].tick_units = 0;
  Engine a(config_);
  EXPECT_FALSE(a.Restore(bad).ok());
  bad = img;
  bad.added_assets[0].asset = AssetId{4};
  Engine b(config_);
  EXPECT_FALSE(b.Restore(bad).ok());
  bad = img;
  bad.added_markets.clear();  // 4 market statuses for 3 markets
  Engine c(config_);
  EXPECT_FALSE(c.Restore(bad).ok());
  // The state hash covers the definitions.
  bad = img;
  bad.added_markets[0].maker_fee_bps = 6;
  EXPECT_NE(HashImage(bad), HashImage(img));
}

// A reader of the journal (gateway, projection, journal tools) learns the
// added definitions from the events, in order, and skips what it knows.
TEST_F(ListingTest, AReaderOfTheEventsLearnsWhatTheEngineAdded) {
  Events asset = Run(Asset("SOL", 9));
  Events market = Run(SolUsdt());
  ASSERT_EQ(Types(market), "MarketAdded");
  EngineConfig reader = config_;
  LearnListings(&reader, asset);
  LearnListings(&reader, market);
  ASSERT_EQ(reader.assets.size(), 4u);
  ASSERT_EQ(reader.markets.size(), 4u);
  EXPECT_EQ(reader.assets[3].symbol, "SOL");
  EXPECT_EQ(reader.assets[3].scale, 9);
  const MarketSpec& learned = reader.markets[3];
  const MarketSpec& engine_has = engine_.config().markets[3];
  EXPECT_EQ(learned.symbol, "SOLUSDT");
  EXPECT_EQ(learned.notional_per_tick_lot, 10);  // derived, as the engine derived it
  EXPECT_EQ(learned.notional_per_tick_lot, engine_has.notional_per_tick_lot);
  EXPECT_EQ(learned.taker_fee_bps, engine_has.taker_fee_bps);
  // Known already (a reader seeded from the grown configuration): skipped.
  EXPECT_FALSE(LearnListing(&reader, market[0]));
  EXPECT_EQ(reader.markets.size(), 4u);
  // Adopting the engine's grown configuration brings a fresh reader level.
  EngineConfig fresh = config_;
  AdoptListings(&fresh, engine_.config());
  EXPECT_EQ(fresh.assets.size(), 4u);
  EXPECT_EQ(fresh.markets.size(), 4u);
  EXPECT_EQ(fresh.markets[3].symbol, "SOLUSDT");
  AdoptListings(&fresh, engine_.config());
  EXPECT_EQ(fresh.markets.size(), 4u);
}

// POST /admin/v1/markets's fields: display units converted with the
// configuration file's checks, each refusal naming the field.
TEST_F(ListingTest, AMarketInDisplayUnitsIsConvertedAndChecked) {
  AddSol();
  const MarketText good{.symbol = "SOLUSDT",
                        .base = "SOL",
                        .quote = "USDT",
                        .tick_size = "0.01",
                        .step_size = "0.00001",
                        .min_qty = "0.00001",
                        .max_qty = "10",
                        .max_price = "100000",
                        .min_notional = "0",
                        .maker_fee_bps = 5,
                        .taker_fee_bps = 10};
  auto spec = MarketFromText(engine_.config(), good);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  const AddMarket want = SolUsdt();
  const AddMarket got = AddMarketOf(*spec);
  EXPECT_EQ(got.symbol.view(), "SOLUSDT");
  EXPECT_EQ(got.base, want.base);
  EXPECT_EQ(got.quote, want.quote);
  EXPECT_EQ(got.tick_units, want.tick_units);
  EXPECT_EQ(got.lot_units, want.lot_units);
  EXPECT_EQ(got.max_qty, want.max_qty);
  EXPECT_EQ(got.max_price, want.max_price);
  EXPECT_EQ(spec->notional_per_tick_lot, 10);
  Events ev = Run(got);
  ASSERT_EQ(Types(ev), "MarketAdded");

  const std::pair<MarketText, std::string_view> bad[] = {
      {[&] {
         MarketText t = good;
         t.symbol = "BTCUSDT";
         t.base = "BTC";
         return t;
       }(),
       "duplicate"},
      {[&] {
         MarketText t = good;
         t.symbol = "X";
         t.base = "DOGE";
         return t;
       }(),
       "base: unknown asset \"DOGE\" (defined: BTC, USDT, ETH, SOL)"},
      {[&] {
         MarketText t = good;
         t.symbol = "X";
         t.tick_size = "0.000000001";
         return t;
       }(),
       "tick_size: \"0.000000001\" is not an amount of USDT"},
      {[&] {
         MarketText t = good;
         t.symbol = "X";
         t.tick_size = "0.00000001";
         return t;
       }(),
       "step_size"},
      {[&] {
         MarketText t = good;
         t.symbol = "X";
         t.tick_size = "0";
         return t;
       }(),
       "tick_size: must be greater than 0"},
      {[&] {
         MarketText t = good;
         t.symbol = "X";
         t.max_price = "100000.005";
         return t;
       }(),
       "max_price"},
      {[&] {
         MarketText t = good;
         t.symbol = "X";
         t.max_price = "1000.015";
         return t;
       }(),
       "max_price: 1000.015 is not a multiple of tick_size 0.01"},
      {[&] {
         MarketText t = good;
         t.symbol = "X";
         t.min_qty = "0.000015";
         return t;
       }(),
       "min_qty: 0.000015 is not a multiple of step_size 0.00001"},
      {[&] {
         MarketText t = good;
         t.symbol = "X";
         t.min_notional = "-1";
         return t;
       }(),
       "min_notional"},
      {[&] {
         MarketText t = good;
         t.symbol = "X";
         t.maker_fee_bps = int64_t{1} << 40;
         return t;
       }(),
       "maker_fee_bps"},
      {[&] {
         MarketText t = good;
         t.symbol = "X";
         t.max_qty = "abc";
         return t;
       }(),
       "max_qty"},
  };
  for (const auto& [text, words] : bad) {
    auto r = MarketFromText(engine_.config(), text);
    ASSERT_FALSE(r.ok()) << words;
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace mb::engine
