// The gateway's history (gateway/history.h) served by the projection: the
// store answers the queries and the projector says how far it has applied.
// This adapter is where the two modules meet, so neither includes the other.
//
// Thread safety: as gateway::History — the store's queries and the
// projector's WaitApplied/stats may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "gateway/history.h"
#include "projection/projector.h"
#include "projection/store.h"

namespace mb::app {

// Every market's history as the history store holds it, shaped for the
// read side (marketdata::ReadSide::SeedHistory): the newest trades
// (options.recent_trades) and as many candles per interval as the read side
// keeps. Markets the store has no trade of are left out.
Result<std::vector<marketdata::MarketHistory>> LoadMarketHistory(
    projection::Store* store, const engine::EngineConfig& config,
    const marketdata::ReadSideOptions& options);

class ProjectionHistory final : public gateway::History {
 public:
  // REQUIRES: store is the projector's store; both outlive this object.
  ProjectionHistory(projection::Store* store, projection::Projector* projector)
      : store_(store), projector_(projector) {}

  Result<std::vector<marketdata::OrderRecord>> AllOrders(const gateway::HistoryFilter& f) override;
  Result<std::optional<marketdata::OrderRecord>> FindOrder(AccountId account, MarketId market,
                                                           OrderId id) override;
  Result<std::optional<marketdata::OrderRecord>> FindOrderByClientId(
      AccountId account, MarketId market, std::string_view client_order_id) override;
  Result<std::vector<marketdata::Fill>> MyTrades(const gateway::HistoryFilter& f) override;
  Result<std::vector<marketdata::ListRecord>> AllOrderLists(
      const gateway::HistoryFilter& f) override;
  Result<std::optional<marketdata::ListRecord>> FindOrderList(AccountId account,
                                                              uint64_t list_id) override;
  Result<std::optional<marketdata::ListRecord>> FindOrderListByClientId(
      AccountId account, std::string_view list_client_order_id) override;
  Result<std::vector<gateway::LedgerLine>> Ledger(const gateway::LedgerFilter& f) override;
  Result<std::vector<gateway::WithdrawalRecord>> Withdrawals(
      const gateway::TransferFilter& f) override;
  Result<std::vector<gateway::DepositRecord>> Deposits(const gateway::TransferFilter& f) override;
  Result<std::optional<gateway::WithdrawalRecord>> FindWithdrawal(AccountId account, uint64_t id,
                                                                  std::string_view ref) override;

  Result<std::vector<marketdata::TradeRow>> MarketTrades(MarketId market, uint64_t from_id,
                                                         std::size_t limit) override;
  Result<std::vector<marketdata::AggTrade>> AggTrades(MarketId market, uint64_t from_id,
                                                      int64_t start_ms, int64_t end_ms,
                                                      std::size_t limit) override;
  Result<std::vector<marketdata::Kline>> Klines(MarketId market, marketdata::KlineInterval interval,
                                                int64_t start_ms, int64_t end_ms,
                                                std::size_t limit) override;

  uint64_t applied_seq() const noexcept override { return projector_->applied_seq(); }
  bool WaitApplied(uint64_t seq, std::chrono::milliseconds timeout) override {
    return projector_->WaitApplied(seq, timeout);
  }
  gateway::HistoryHealth Health() const override;

 private:
  projection::Store* const store_;
  projection::Projector* const projector_;
};

}  // namespace mb::app
