// Transfers between venues, the gateway's side (docs/transfers.md):
//   the user's calls as Binance's wallet API has them (/sapi/v1/capital/...),
//   the calls another venue makes (/venue/v1/transfers: credit each transfer
//   once, by (source venue, id)), and the operator's list, void and links.
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <random>

#include "common/decimal.h"
#include "gateway/gateway_impl.h"
#include "log/log.h"
#include "transfer/address.h"
#include "transfer/protocol.h"

namespace mb::gateway {
namespace {

// Binance's wallet error codes (ccxt maps them: -4018 BadSymbol, -4026
// InsufficientFunds, ...).
ApiError NoSuchCoin() { return ApiError{400, -4018, "We don't have this asset."}; }
ApiError IllegalAddress(std::string_view why) {
  return ApiError{400, -4033, "Illegal address: " + std::string(why)};
}

std::string WalletTime(int64_t ns) {
  if (ns <= 0) return "";
  const std::time_t s = static_cast<std::time_t>(ns / 1'000'000'000);
  return fmt::format("{:%Y-%m-%d %H:%M:%S}", fmt::gmtime(s));
}

// Binance's withdrawal status: 4 processing, 6 completed, 3 rejected,
// 1 cancelled (an operator's void).
int WithdrawStatus(const WithdrawalRecord& w) {
  switch (w.state) {
    case TransferState::kPending:
      return 4;
    case TransferState::kCompleted:
      return 6;
    case TransferState::kRefunded:
      return w.reason == engine::RefundReason::kVoided ? 1 : 3;
  }
  return 4;
}

std::string_view RefundText(engine::RefundReason r) {
  switch (r) {
    case engine::RefundReason::kVoided:
      return "Voided by the operator; the amount is back in the balance.";
    case engine::RefundReason::kInvalidAddress:
      return "The destination venue knows no such address; the amount is back in the balance.";
    case engine::RefundReason::kUnknownAsset:
      return "The destination venue does not list this asset; the amount is back in the balance.";
    case engine::RefundReason::kAccountUnavailable:
      return "The destination account cannot receive; the amount is back in the balance.";
    case engine::RefundReason::kRefused:
      return "The destination venue refused the transfer; the amount is back in the balance.";
  }
  return "";
}

// The parameters' time range and paging, as Binance's history calls take them.
std::optional<ApiError> TransferPaging(const Params& p, TransferFilter* f) {
  std::optional<int64_t> start, end, offset, limit;
  if (auto e = p.GetInt("startTime", &start)) return e;
  if (auto e = p.GetInt("endTime", &end)) return e;
  if (auto e = p.GetInt("offset", &offset)) return e;
  if (auto e = p.GetInt("limit", &limit)) return e;
  f->start_ms = start.value_or(0);
  f->end_ms = end.value_or(0);
  if (offset && *offset < 0) return ApiError::BadParam("offset", "must not be negative");
  f->offset = static_cast<std::size_t>(offset.value_or(0));
  if (limit && *limit <= 0) return ApiError::BadParam("limit", "must be positive");
  f->limit = std::min<std::size_t>(static_cast<std::size_t>(limit.value_or(1000)), 1000);
  return std::nullopt;
}

}  // namespace

std::optional<AssetId> Gateway::Impl::CoinParam(const Ctx& c, std::optional<ApiError>* error) {
  std::string_view coin;
  if (auto e = c.params.Require("coin", &coin)) {
    *error = e;
    return std::nullopt;
  }
  const std::optional<AssetId> asset = AssetNamed(coin);
  if (!asset) *error = NoSuchCoin();
  return asset;
}

std::optional<AssetId> Gateway::Impl::AssetNamed(std::string_view symbol) const {
  for (std::size_t i = 0; i < config_.assets.size(); ++i) {
    if (config_.assets[i].symbol == symbol) return static_cast<AssetId>(i);
  }
  return std::nullopt;
}

std::string Gateway::Impl::DepositAddressOf(AccountId account, AssetId asset) const {
  return transfer::MakeAddress(options_.venue, account,
                               config_.assets[static_cast<std::size_t>(asset)].symbol);
}

// GET /sapi/v1/capital/config/getall: every asset, its balance (what
// transfers to other venues hold as `withdrawing`) and its one network
// ("MB": transfers between Matchbook venues), with the withdrawal fee,
// minimum and whether deposits and withdrawals are open. From the read side
// only: it answers while the history is down.
void Gateway::Impl::CapitalConfig(Ctx& c) {
  const auto balances = read_side_.Balances(c.account);
  json::array out;
  for (std::size_t i = 0; i < config_.assets.size(); ++i) {
    const engine::AssetSpec& a = config_.assets[i];
    const AssetId id = static_cast<AssetId>(i);
    const bool withdraw = a.withdraw_enabled && !options_.venues.empty();
    json::object net;
    net["network"] = "MB";
    net["coin"] = a.symbol;
    net["name"] = "Matchbook venues";
    net["isDefault"] = true;
    net["depositEnable"] = a.deposit_enabled;
    net["withdrawEnable"] = withdraw;
    net["depositDesc"] = a.deposit_enabled ? "" : "Deposits are suspended.";
    net["withdrawDesc"] = withdraw ? "" : "Withdrawals are suspended.";
    net["specialTips"] = "";
    net["resetAddressStatus"] = false;
    net["addressRegex"] = "^[A-Za-z0-9_-]{1,32}:[0-9]{1,10}:" + a.symbol + ":[0-9a-f]{8}$";
    net["memoRegex"] = "";
    net["withdrawFee"] = FormatDecimal(a.withdraw_fee, a.scale);
    net["withdrawMin"] =
        FormatDecimal(std::max<int64_t>({a.withdraw_min, a.withdraw_fee + 1, 1}), a.scale);
    net["withdrawMax"] = FormatDecimal(std::numeric_limits<int64_t>::max(), a.scale);
    net["withdrawIntegerMultiple"] = FormatDecimal(1, a.scale);
    net["minConfirm"] = 1;
    net["unLockConfirm"] = 0;
    net["sameAddress"] = false;
    net["estimatedArrivalTime"] = 1;
    net["busy"] = false;
    json::object o;
    o["coin"] = a.symbol;
    o["name"] = a.symbol;
    o["depositAllEnable"] = a.deposit_enabled;
    o["withdrawAllEnable"] = withdraw;
    o["free"] = AssetAmount(config_, id, balances[i].available);
    o["locked"] = AssetAmount(config_, id, balances[i].locked);
    o["freeze"] = AssetAmount(config_, id, Amount{0});
    o["withdrawing"] = AssetAmount(config_, id, balances[i].held);
    o["ipoing"] = AssetAmount(config_, id, Amount{0});
    o["ipoable"] = AssetAmount(config_, id, Amount{0});
    o["storage"] = AssetAmount(config_, id, Amount{0});
    o["isLegalMoney"] = false;
    o["trading"] = true;
    o["networkList"] = json::array{std::move(net)};
    out.push_back(std::move(o));
  }
  Ok(c, json::serialize(out));
}

// GET /sapi/v1/capital/deposit/address?coin[&network]
void Gateway::Impl::DepositAddress(Ctx& c) {
  std::optional<ApiError> error;
  const std::optional<AssetId> asset = CoinParam(c, &error);
  if (!asset) return Reply(c, *error);
  if (auto n = c.params.Get("network"); n && !n->empty() && *n != "MB") {
    return Reply(c, ApiError{400, -4018, "Network " + std::string(*n) + " is not supported: MB."});
  }
  json::object o;
  o["address"] = DepositAddressOf(c.account, *asset);
  o["coin"] = config_.assets[static_cast<std::size_t>(*asset)].symbol;
  o["tag"] = "";
  o["url"] = "";
  Ok(c, json::serialize(o));
}

// POST /sapi/v1/capital/withdraw/apply: coin, address, amount[,
// withdrawOrderId][, network]. The amount leaves the balance at once (held);
// the destination receives amount - withdrawFee. {"id": "<transfer id>"}.
void Gateway::Impl::WithdrawApply(Ctx& c) {
  std::optional<ApiError> error;
  const std::optional<AssetId> asset = CoinParam(c, &error);
  if (!asset) return Reply(c, *error);
  const engine::AssetSpec& spec = config_.assets[static_cast<std::size_t>(*asset)];
  if (!spec.withdraw_enabled) {
    return Reply(c, ApiError{400, -4019, "Current asset is not open for withdrawal."});
  }
  if (auto n = c.params.Get("network"); n && !n->empty() && *n != "MB") {
    return Reply(c, ApiError{400, -4018, "Network " + std::string(*n) + " is not supported: MB."});
  }
  if (auto tag = c.params.Get("addressTag"); tag && !tag->empty()) {
    return Reply(c, ApiError{400, -4008, "Address tag validation is not passed: MB takes none."});
  }
  std::string_view address_text, amount_text;
  if (auto e = c.params.Require("address", &address_text)) return Reply(c, *e);
  if (auto e = c.params.Require("amount", &amount_text)) return Reply(c, *e);
  int64_t units = 0;
  const DecimalError de = TryParseDecimal(amount_text, spec.scale, false, &units);
  if (de == DecimalError::kTooManyDecimals) {
    return Reply(c, ApiError{400, -4021,
                             fmt::format("Asset withdrawal must be an integer multiple of {}.",
                                         FormatDecimal(1, spec.scale))});
  }
  if (de != DecimalError::kOk || units <= 0) {
    return Reply(c, ApiError::BadParam("amount", "must be a positive decimal"));
  }
  const int64_t min = std::max<int64_t>(spec.withdraw_min, 1);
  if (units < min) {
    return Reply(c, ApiError{400, -4022,
                             fmt::format("Not less than the minimum pick-up quantity {}.",
                                         FormatDecimal(min, spec.scale))});
  }
  if (units <= spec.withdraw_fee) {
    return Reply(
        c, ApiError{400, -4028, "The amount of withdrawal must be greater than the Commission."});
  }
  auto address = transfer::ParseAddress(address_text);
  if (!address.ok()) return Reply(c, IllegalAddress(address.status().message()));
  if (address->asset != spec.symbol) {
    return Reply(c, IllegalAddress(fmt::format("it is an address for {}, not {}", address->asset,
                                               spec.symbol)));
  }
  if (address->venue == options_.venue) {
    return Reply(c, IllegalAddress("it is an address of this venue; move funds here by trading"));
  }
  if (dispatcher_ == nullptr || !dispatcher_->Linked(address->venue)) {
    return Reply(c, IllegalAddress("this venue has no link to venue \"" + address->venue + "\""));
  }
  // The idempotency key is the account's: "<account>/<withdrawOrderId>".
  std::string ref;
  const auto order_id = c.params.Get("withdrawOrderId");
  if (order_id && !order_id->empty()) {
    if (order_id->size() > 50) {
      return Reply(c, ApiError::BadParam("withdrawOrderId", "at most 50 characters"));
    }
    ref = fmt::format("{}/{}", static_cast<uint32_t>(c.account), *order_id);
  } else {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    ref = fmt::format("{}/~{:016x}", static_cast<uint32_t>(c.account), rng());
  }
  engine::TransferOut out;
  out.account = c.account;
  out.asset = *asset;
  out.amount = Amount{units};
  out.fee = Amount{spec.withdraw_fee};
  if (!out.ref.Assign(ref) || !out.address.Assign(address_text)) {
    return Reply(c, IllegalAddress("too long"));
  }
  engine::Command cmd;
  cmd.body = out;
  Submit(c, "withdraw", cmd, [this, out](Pending& p) {
    const engine::Rejected* r = FirstReject(p.events);
    if (r == nullptr) return p.Reply(200, fmt::format(R"({{"id":"{}"}})", Raw(p.seq)));
    if (r->reason == engine::RejectReason::kInsufficientBalance) {
      return p.Fail(ApiError{400, -4026, "You have insufficient balance."});
    }
    if (r->reason != engine::RejectReason::kDuplicateTransfer) {
      return p.Fail(ApiError{400, -1130, std::string(engine::ToString(r->reason))});
    }
    // The withdrawOrderId was used: the same withdrawal is answered with its
    // id, another one is refused. The history says which.
    Ctx again;
    again.respond = std::move(p.respond);
    again.version = p.version;
    again.keep_alive = p.keep_alive;
    again.meta = p.meta;
    const uint64_t first = r->existing_id;
    if (history_ == nullptr) {
      return Reply(again, ApiError{400, -1130, "withdrawOrderId was used before."});
    }
    Defer(again, [this, out, first](HistoryJob& j) {
      auto w = history_->FindWithdrawal(out.account, first, "");
      if (!w.ok()) return HistoryUnavailable(j, w.status());
      if (*w && (*w)->asset == out.asset && (*w)->amount == out.amount &&
          (*w)->address == out.address.view()) {
        return JobReply(j, 200, fmt::format(R"({{"id":"{}"}})", first));
      }
      JobReply(j, ApiError{400, -1130,
                           "withdrawOrderId was used for another withdrawal (coin, amount or "
                           "address differ)."});
    });
  });
}

// GET /sapi/v1/capital/withdraw/history[?coin][&withdrawOrderId][&status]
// [&startTime][&endTime][&offset][&limit][&idList], newest first.
void Gateway::Impl::WithdrawHistory(Ctx& c) {
  if (history_ == nullptr) {
    return Reply(c, ApiError{404, -1000, "Withdrawal history needs the projection."});
  }
  TransferFilter f;
  f.account = c.account;
  if (auto e = TransferPaging(c.params, &f)) return Reply(c, *e);
  if (c.params.Get("coin")) {
    std::optional<ApiError> error;
    f.asset = CoinParam(c, &error);
    if (!f.asset) return Reply(c, *error);
  }
  std::optional<int64_t> status;
  if (auto e = c.params.GetInt("status", &status)) return Reply(c, *e);
  std::string order_id(c.params.Get("withdrawOrderId").value_or(""));
  std::string id_list(c.params.Get("idList").value_or(""));
  const AccountId account = c.account;
  Defer(c, [this, f, status, order_id, id_list, account](HistoryJob& j) {
    TransferFilter all = f;
    if (status || !order_id.empty() || !id_list.empty()) {
      all.offset = 0;
      all.limit = 1'000'000;  // filtered below, then paged
    }
    auto rows = history_->Withdrawals(all);
    if (!rows.ok()) return HistoryUnavailable(j, rows.status());
    const std::string ref =
        order_id.empty() ? "" : fmt::format("{}/{}", static_cast<uint32_t>(account), order_id);
    json::array out;
    std::size_t skipped = 0;
    for (const WithdrawalRecord& w : *rows) {
      if (status && WithdrawStatus(w) != *status) continue;
      if (!ref.empty() && w.ref != ref) continue;
      if (!id_list.empty()) {
        const std::string id = std::to_string(w.transfer_id);
        bool listed = false;
        for (std::size_t at = 0; at <= id_list.size();) {
          const std::size_t comma = std::min(id_list.find(',', at), id_list.size());
          listed = listed || id_list.substr(at, comma - at) == id;
          at = comma + 1;
        }
        if (!listed) continue;
      }
      if (all.limit != f.limit && skipped++ < f.offset) continue;
      if (out.size() >= f.limit) break;
      const std::size_t a = static_cast<std::size_t>(w.asset);
      const int scale = config_.assets[a].scale;
      json::object o;
      o["id"] = std::to_string(w.transfer_id);
      o["amount"] = FormatDecimal((w.amount - w.fee).value, scale);
      o["transactionFee"] = FormatDecimal(w.fee.value, scale);
      o["coin"] = config_.assets[a].symbol;
      o["status"] = WithdrawStatus(w);
      o["address"] = w.address;
      o["txId"] = fmt::format("{}:{}", options_.venue, w.transfer_id);
      o["applyTime"] = WalletTime(w.time_ns);
      o["network"] = "MB";
      o["transferType"] = 0;
      const std::size_t slash = w.ref.find('/');
      const std::string own = slash == std::string::npos ? "" : w.ref.substr(slash + 1);
      if (!own.empty() && own[0] != '~') o["withdrawOrderId"] = own;
      if (w.state == TransferState::kRefunded) o["info"] = RefundText(w.reason);
      o["confirmNo"] = w.state == TransferState::kCompleted ? 1 : 0;
      o["walletType"] = 0;
      o["txKey"] = "";
      if (w.resolved_ns != 0) o["completeTime"] = WalletTime(w.resolved_ns);
      out.push_back(std::move(o));
    }
    JobReply(j, 200, json::serialize(out));
  });
}

// GET /sapi/v1/capital/deposit/hisrec[?coin][&status][&startTime][&endTime]
// [&offset][&limit][&txId], newest first. Every deposit is credited when it
// is recorded: status 1.
void Gateway::Impl::DepositHistory(Ctx& c) {
  if (history_ == nullptr) {
    return Reply(c, ApiError{404, -1000, "Deposit history needs the projection."});
  }
  TransferFilter f;
  f.account = c.account;
  if (auto e = TransferPaging(c.params, &f)) return Reply(c, *e);
  if (c.params.Get("coin")) {
    std::optional<ApiError> error;
    f.asset = CoinParam(c, &error);
    if (!f.asset) return Reply(c, *error);
  }
  std::optional<int64_t> status;
  if (auto e = c.params.GetInt("status", &status)) return Reply(c, *e);
  if (status && *status != 1) return Ok(c, "[]");
  std::string tx(c.params.Get("txId").value_or(""));
  const AccountId account = c.account;
  Defer(c, [this, f, tx, account](HistoryJob& j) {
    TransferFilter all = f;
    if (!tx.empty()) {
      all.offset = 0;
      all.limit = 1'000'000;
    }
    auto rows = history_->Deposits(all);
    if (!rows.ok()) return HistoryUnavailable(j, rows.status());
    json::array out;
    std::size_t skipped = 0;
    for (const DepositRecord& d : *rows) {
      if (!tx.empty() && d.ref != tx) continue;
      if (all.limit != f.limit && skipped++ < f.offset) continue;
      if (out.size() >= f.limit) break;
      const std::size_t a = static_cast<std::size_t>(d.asset);
      json::object o;
      o["id"] = std::to_string(d.transfer_id);
      o["amount"] = FormatDecimal(d.amount.value, config_.assets[a].scale);
      o["coin"] = config_.assets[a].symbol;
      o["network"] = "MB";
      o["status"] = 1;
      o["address"] = DepositAddressOf(account, d.asset);
      o["addressTag"] = "";
      o["txId"] = d.ref;
      o["insertTime"] = d.time_ns / 1'000'000;
      o["completeTime"] = d.time_ns / 1'000'000;
      o["transferType"] = 0;
      o["confirmTimes"] = "1/1";
      o["unlockConfirm"] = 0;
      o["walletType"] = 0;
      out.push_back(std::move(o));
    }
    JobReply(j, 200, json::serialize(out));
  });
}

// --- another venue's call: POST /venue/v1/transfers ---------------------------

// The deposits of one call: each submitted as a Deposit with reference
// "<source venue>:<id>"; the answer goes once every one is durable (or
// refused), from the engine or journal thread.
struct Gateway::Impl::VenueBatch final : exchange::Completion {
  Impl* gw = nullptr;
  Respond respond;
  unsigned version = 11;
  bool keep_alive = true;
  std::vector<transfer::DeliveryResult> results;
  std::atomic<std::size_t> left{0};

  void Count(std::size_t outcome) const {
    if (gw->venue_deposits_[outcome] != nullptr) gw->venue_deposits_[outcome]->Inc();
  }
  void Finish() {
    if (left.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    respond(gw->MakeResponse(version, keep_alive, 200, transfer::EncodeResults(results), {}));
    delete this;
  }
  void OnDone(uint64_t tag, const exchange::Outcome& o) noexcept override {
    transfer::DeliveryResult& r = results[tag];
    if (o.state != exchange::Outcome::State::kDurable || o.events.empty()) {
      r.outcome = transfer::Outcome::kRetry;
      r.msg = "not recorded; deliver again";
    } else if (const auto* d = std::get_if<engine::Deposited>(&o.events.front().body)) {
      r.outcome = transfer::Outcome::kCredited;
      r.deposit_id = Raw(d->transfer_id);
      Count(0);
    } else if (const auto* x = std::get_if<engine::Rejected>(&o.events.front().body)) {
      if (x->reason == engine::RejectReason::kDuplicateTransfer) {
        r.outcome = transfer::Outcome::kCredited;  // delivered before: the first credit stands
        r.deposit_id = x->existing_id;
        Count(1);
      } else {
        Count(2);
        r.outcome = transfer::Outcome::kRejected;
        r.reason = x->reason == engine::RejectReason::kUnknownAccount
                       ? engine::RefundReason::kAccountUnavailable
                   : x->reason == engine::RejectReason::kUnknownAsset
                       ? engine::RefundReason::kUnknownAsset
                       : engine::RefundReason::kRefused;
        r.msg = std::string(engine::ToString(x->reason));
      }
    }
    Finish();
  }
};

void Gateway::Impl::VenueCall(Ctx& c) {
  auto refuse = [&](int status, std::string_view from, std::string why) {
    log::Warn("transfers", "venue call refused",
              {{"from", std::string(from)}, {"remote", c.remote}, {"why", why}});
    Reply(c, ApiError{status, -1002, "Venue call refused: " + why});
  };
  if (c.req.method() != http::verb::post) return Reply(c, ApiError::MethodNotAllowed());
  if (replica_ || exchange_ == nullptr) {
    return Reply(c, ApiError{503, -1000, "This server is a read replica: call the primary."});
  }
  const auto header = [&](std::string_view name) {
    auto h = c.req.find(name);
    return h == c.req.end() ? std::string() : std::string(Trim(h->value()));
  };
  const std::string from = header(transfer::kVenueHeader);
  const std::string ts = header(transfer::kTimestampHeader);
  const std::string sig = header(transfer::kSignatureHeader);
  const transfer::VenueLink* link = nullptr;
  for (const transfer::VenueLink& v : options_.venues) {
    if (v.name == from) link = &v;
  }
  if (link == nullptr) return refuse(401, from, "unknown venue \"" + from + "\"");
  // Milliseconds: digits only, at most 15 of them (no sign, no overflow).
  int64_t ms = -1;
  if (!ts.empty() && ts.size() <= 15 && ts.find_first_not_of("0123456789") == std::string::npos) {
    ms = std::stoll(ts);
  }
  const int64_t skew = ms - clock_.wall_ms();
  if (ms < 0 || skew > int64_t{options_.venue_max_skew_ms} ||
      -skew > int64_t{options_.venue_max_skew_ms}) {
    return refuse(401, from,
                  fmt::format("timestamp \"{}\" is stale or malformed (allowed skew {} ms)",
                              ts.substr(0, 20), options_.venue_max_skew_ms));
  }
  const std::string expected = transfer::Sign(link->secret, ts, "POST", c.path, c.req.body());
  if (!transfer::SignatureMatches(expected, sig)) return refuse(401, from, "wrong signature");
  auto deliveries = transfer::DecodeDeliveries(c.req.body());
  if (!deliveries.ok()) {
    return Reply(c, ApiError{400, -1130, deliveries.status().message()});
  }
  auto* batch = new VenueBatch;
  batch->gw = this;
  batch->respond = std::move(c.respond);
  batch->version = c.version;
  batch->keep_alive = c.keep_alive;
  batch->results.resize(deliveries->size());
  batch->left.store(deliveries->size() + 1);  // +1: released after the loop
  for (std::size_t i = 0; i < deliveries->size(); ++i) {
    const transfer::Delivery& d = (*deliveries)[i];
    transfer::DeliveryResult& r = batch->results[i];
    r.id = d.id;
    r.outcome = transfer::Outcome::kRejected;
    auto reject = [&](engine::RefundReason reason, std::string msg) {
      r.reason = reason;
      r.msg = std::move(msg);
      batch->Count(2);
      batch->Finish();
    };
    auto address = transfer::ParseAddress(d.address);
    if (!address.ok()) {
      reject(engine::RefundReason::kInvalidAddress, address.status().message());
      continue;
    }
    if (address->venue != options_.venue) {
      reject(engine::RefundReason::kInvalidAddress, "an address of venue " + address->venue);
      continue;
    }
    const std::optional<AssetId> asset = AssetNamed(d.coin);
    if (!asset) {
      reject(engine::RefundReason::kUnknownAsset, "no asset " + d.coin);
      continue;
    }
    const engine::AssetSpec& spec = config_.assets[static_cast<std::size_t>(*asset)];
    if (address->asset != d.coin) {
      reject(engine::RefundReason::kInvalidAddress, "an address for " + address->asset);
      continue;
    }
    if (!spec.deposit_enabled) {
      reject(engine::RefundReason::kRefused, "deposits of " + d.coin + " are suspended");
      continue;
    }
    if (!keys_->FindAccount(address->account)) {
      reject(engine::RefundReason::kAccountUnavailable, "no such account");
      continue;
    }
    int64_t units = 0;
    if (TryParseDecimal(d.amount, spec.scale, false, &units) != DecimalError::kOk || units <= 0) {
      reject(engine::RefundReason::kRefused,
             fmt::format("amount \"{}\" is not a positive {} amount with at most {} decimals",
                         d.amount.substr(0, 40), d.coin, spec.scale));
      continue;
    }
    engine::Deposit dep;
    dep.account = address->account;
    dep.asset = *asset;
    dep.amount = Amount{units};
    if (!dep.ref.Assign(fmt::format("{}:{}", from, d.id))) {
      reject(engine::RefundReason::kRefused, "reference too long");
      continue;
    }
    engine::Command cmd;
    cmd.body = dep;
    if (exchange_->Submit(cmd, batch, i) != exchange::SubmitResult::kOk) {
      r.outcome = transfer::Outcome::kRetry;
      r.msg = "busy";
      batch->Finish();
    }
  }
  batch->Finish();
}

// --- the operator's calls ------------------------------------------------------

// GET /admin/v1/transfers?state=pending|completed|refunded[&accountId][&coin]
// [&offset][&limit]: transfers to other venues, newest first.
void Gateway::Impl::AdminTransfers(Ctx& c) {
  if (history_ == nullptr) {
    return Reply(c, ApiError{404, -1000, "The transfer list needs the projection."});
  }
  if (auto e = Params::Parse(c.query, {}, &c.params)) return Reply(c, *e);
  TransferFilter f;
  if (auto e = TransferPaging(c.params, &f)) return Reply(c, *e);
  if (auto s = c.params.Get("state")) {
    if (*s == "pending") {
      f.state = TransferState::kPending;
    } else if (*s == "completed") {
      f.state = TransferState::kCompleted;
    } else if (*s == "refunded") {
      f.state = TransferState::kRefunded;
    } else {
      return Reply(c, ApiError{400, -1130, "state must be pending, completed or refunded."});
    }
  }
  if (auto a = c.params.Get("accountId")) {
    const auto id = ParseAccountId(*a);
    if (!id) return Reply(c, ApiError{400, -1130, "accountId is not an account id."});
    f.account = *id;
  }
  if (c.params.Get("coin")) {
    std::optional<ApiError> error;
    f.asset = CoinParam(c, &error);
    if (!f.asset) return Reply(c, *error);
  }
  Defer(c, [this, f](HistoryJob& j) {
    auto rows = history_->Withdrawals(f);
    if (!rows.ok()) return HistoryUnavailable(j, rows.status());
    json::array out;
    for (const WithdrawalRecord& w : *rows) {
      json::object o;
      o["id"] = w.transfer_id;
      o["accountId"] = static_cast<uint32_t>(w.account);
      o["coin"] = config_.assets[static_cast<std::size_t>(w.asset)].symbol;
      o["amount"] = AssetAmount(config_, w.asset, w.amount);
      o["fee"] = AssetAmount(config_, w.asset, w.fee);
      o["address"] = w.address;
      o["ref"] = w.ref;
      o["state"] = w.state == TransferState::kPending     ? "pending"
                   : w.state == TransferState::kCompleted ? "completed"
                                                          : "refunded";
      if (w.state == TransferState::kRefunded) o["reason"] = engine::ToString(w.reason);
      o["time"] = w.time_ns / 1'000'000;
      if (w.resolved_ns != 0) o["resolvedTime"] = w.resolved_ns / 1'000'000;
      out.push_back(std::move(o));
    }
    JobReply(j, 200, json::serialize(out));
  });
}

// POST /admin/v1/transfers/{id}/void: refunds a pending transfer. Only for
// one the destination has not credited (its operator says so, or its
// deposit history): a voided transfer the destination credits later exists
// twice.
void Gateway::Impl::AdminVoidTransfer(Ctx& c, std::string_view id_text) {
  uint64_t id = 0;
  auto [end, ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
  if (ec != std::errc() || end != id_text.data() + id_text.size() || id == 0) {
    return Reply(c, ApiError{404, -1000, "No such transfer."});
  }
  engine::Command cmd;
  cmd.body = engine::ResolveTransfer{TransferId{id}, false, engine::RefundReason::kVoided};
  Submit(c, "void_transfer", cmd, [id](Pending& p) {
    if (const engine::Rejected* r = FirstReject(p.events)) {
      (void)r;
      return p.Fail(ApiError{409, -1000, fmt::format("Transfer {} is not pending.", id)});
    }
    p.Reply(200, fmt::format(R"({{"id":{},"state":"refunded","reason":"VOIDED"}})", id));
  });
}

// GET /admin/v1/venues: the links to the other venues.
void Gateway::Impl::AdminVenues(Ctx& c) {
  if (dispatcher_ == nullptr) {
    return Ok(c, fmt::format(R"({{"venue":"{}","links":{{}}}})", options_.venue));
  }
  Ok(c, dispatcher_->HealthJson());
}

}  // namespace mb::gateway
