// REST trading (orders, cancels, cancel-replace, amend, open orders, account,
// listen keys). The routes run on the io threads; an order's ACK answer on
// the engine thread (OnSequenced); RESULT and FULL answers on the fan-out
// thread (Pending::finish); history answers on the history thread.
#include "gateway/gateway_impl.h"

namespace mb::gateway {

// The dry run: what the engine would refuse for certain, refused here with
// Binance's error, per the latest read-side snapshot. The engine decides.
std::optional<ApiError> Gateway::Impl::DryRun(const engine::PlaceOrder& o) {
  const auto snap = Snap(o.market);
  if (snap->status != MarketStatus::kTrading) {
    return ApiError::FromReject(engine::CommandType::kPlaceOrder,
                                engine::RejectReason::kMarketNotTrading);
  }
  // MAX_NUM_ALGO_ORDERS: the account's conditional orders waiting in the
  // market, per the read side (the engine does not count them).
  if (engine::IsConditional(o.type) &&
      read_side_.WaitingOrders(o.account, o.market) >=
          RulesOf(options_.market_rules, o.market).max_num_algo_orders) {
    return ApiError::NewOrderRejected("Filter failure: MAX_NUM_ALGO_ORDERS");
  }
  // MAX_NUM_ICEBERG_ORDERS: the account's open iceberg orders in the market.
  if (o.iceberg_qty.value != 0 &&
      read_side_.IcebergOrders(o.account, o.market) >=
          RulesOf(options_.market_rules, o.market).max_num_iceberg_orders) {
    return ApiError::NewOrderRejected("Filter failure: MAX_NUM_ICEBERG_ORDERS");
  }
  if (const std::optional<Amount> need = RequiredLock(config_, o)) {
    const engine::MarketSpec& m = config_.markets[static_cast<std::size_t>(o.market)];
    const AssetId asset = engine::SpendAsset(m, o.side);
    if (read_side_.balance(o.account, asset).available < *need) {
      return ApiError::InsufficientBalance();
    }
  }
  return std::nullopt;
}

void Gateway::Impl::NewOrderRoute(Ctx& c) {
  NewOrder o;
  if (auto e = ParseNewOrder(c.params, config_, c.account, &o, options_.market_rules)) {
    return Reply(c, *e);
  }
  if (o.client_order_id.empty()) {
    o.client_order_id = "mb-" + RandomToken(22);
    (void)o.place.client_order_id.Assign(o.client_order_id);
  }
  if (auto e = DryRun(o.place)) return Reply(c, *e);
  SubmitOrder(c, "new_order", o,
              [](Pending& p, std::string body) { p.Reply(200, std::move(body)); });
}

// Places `o`; `done` gets the Binance answer body, `fail` (or, without it,
// the Pending's Fail) the engine's refusal.
void Gateway::Impl::SubmitOrder(Ctx& c, const char* kind, const NewOrder& o,
                                std::function<void(Pending&, std::string)> done, OrderFail fail) {
  engine::Command cmd;
  cmd.body = o.place;
  const RespType resp = o.resp;
  std::function<bool(Pending&, std::span<const Event>)> on_seq;
  if (resp == RespType::kAck) {
    // ACK: answered once sequenced. A rejected order is answered then too
    // (a reject changes nothing, so it is final when decided).
    on_seq = [this, done, fail, place = o.place](Pending& p, std::span<const Event> ev) {
      if (const engine::Rejected* r = FirstReject(ev)) {
        // Under the idempotent rule a duplicate is answered from the read
        // side once durable (below).
        if (r->reason == engine::RejectReason::kDuplicateClientOrderId && idempotent()) {
          return false;
        }
        AnswerReject(p, place, *r, RespType::kAck, done, fail);
        return true;
      }
      std::vector<marketdata::Fill> fills;
      const marketdata::OrderRecord rec = OrderFromEvents(config_, ev, &fills);
      done(p, NewOrderJson(config_, rec, {}, RespType::kAck, ev.front().timestamp_ns / 1'000'000));
      return true;
    };
  }
  Submit(
      c, kind, cmd,
      [this, resp, done, fail, place = o.place](Pending& p) {
        if (p.acked) return;
        if (const engine::Rejected* r = FirstReject(p.events)) {
          return AnswerReject(p, place, *r, resp, done, fail);
        }
        std::vector<marketdata::Fill> fills;
        const marketdata::OrderRecord rec = OrderFromEvents(config_, p.events, &fills);
        done(p, NewOrderJson(config_, rec, fills, resp, p.events.front().timestamp_ns / 1'000'000));
      },
      std::move(on_seq));
}

// Whether the venue answers a re-submitted client order id with the first
// order ([engine] client_order_id = "idempotent") instead of Binance's -2010.
bool Gateway::Impl::idempotent() const {
  return config_.client_order_ids == engine::ClientOrderIds::kIdempotent;
}

// A rejected order's answer: -2010 with the reason (a client order id of an
// open order: "Duplicate order sent.", as on Binance). Under the idempotent
// rule a re-submitted client order id is answered with the first order's
// current state instead (docs/architecture.md, "The domain").
void Gateway::Impl::AnswerReject(Pending& p, const engine::PlaceOrder& place,
                                 const engine::Rejected& r, RespType resp,
                                 const std::function<void(Pending&, std::string)>& done,
                                 const OrderFail& fail) {
  if (r.reason == engine::RejectReason::kDuplicateClientOrderId && r.existing_id != 0 &&
      idempotent()) {
    const auto o =
        read_side_.FindOrder(place.account, place.market, static_cast<OrderId>(r.existing_id));
    if (o) {
      const auto fills = read_side_.MyTrades(place.account, place.market, r.existing_id, 0, 0, 0,
                                             options_.read_side.history_trades);
      return done(p, NewOrderJson(config_, *o, fills, resp, o->time_ns / 1'000'000));
    }
  }
  const ApiError e = ApiError::FromReject(engine::CommandType::kPlaceOrder, r.reason);
  if (fail) return fail(p, e);
  p.Fail(e);
}

void Gateway::Impl::TestOrder(Ctx& c) {
  NewOrder o;
  if (auto e = ParseNewOrder(c.params, config_, c.account, &o, options_.market_rules)) {
    return Reply(c, *e);
  }
  if (auto e = DryRun(o.place)) return Reply(c, *e);
  Ok(c, "{}");
}

// orderId and/or origClientOrderId (one of them is required; *client_id
// is empty when not sent).
std::optional<ApiError> Gateway::Impl::OrderRefParam(const Ctx& c, std::optional<uint64_t>* id,
                                                     std::string* client_id) {
  if (auto e = c.params.GetUint("orderId", id)) return e;
  if (auto cid = c.params.Get("origClientOrderId")) *client_id = std::string(*cid);
  if (*id || !client_id->empty()) return std::nullopt;
  return ApiError::MandatoryMissing("orderId");
}

// Both ids (Binance): the order is looked up by orderId, and must carry the
// origClientOrderId sent, else -2039.
std::optional<ApiError> Gateway::Impl::CheckClientId(const marketdata::OrderRecord& rec,
                                                     std::optional<uint64_t> id,
                                                     std::string_view client_id) {
  if (id && !client_id.empty() && rec.client_order_id.view() != client_id) {
    return ApiError::ClientOrderIdInvalid();
  }
  return std::nullopt;
}

// The order as the read side holds it (open, or closed and still held).
std::optional<ApiError> Gateway::Impl::FindOrderParam(const Ctx& c, MarketId market,
                                                      marketdata::OrderRecord* out) {
  std::optional<uint64_t> id;
  std::string cid;
  if (auto e = OrderRefParam(c, &id, &cid)) return e;
  const std::optional<marketdata::OrderRecord> rec =
      id ? read_side_.FindOrder(c.account, market, static_cast<OrderId>(*id))
         : read_side_.FindOrderByClientId(c.account, market, cid);
  if (!rec) return ApiError::NoSuchOrder();
  if (auto e = CheckClientId(*rec, id, cid)) return e;
  *out = *rec;
  return std::nullopt;
}

// An open order from the read side; any other from the history when there
// is one.
void Gateway::Impl::GetOrder(Ctx& c) {
  MarketId m{};
  if (auto e = SymbolParam(c, &m)) return Reply(c, *e);
  if (history_ == nullptr) {
    marketdata::OrderRecord rec;
    if (auto e = FindOrderParam(c, m, &rec)) return Reply(c, *e);
    return Ok(c, OrderJson(config_, rec));
  }
  std::optional<uint64_t> id;
  std::string cid;
  if (auto e = OrderRefParam(c, &id, &cid)) return Reply(c, *e);
  const std::optional<marketdata::OrderRecord> rec =
      id ? read_side_.FindOrder(c.account, m, static_cast<OrderId>(*id))
         : read_side_.FindOrderByClientId(c.account, m, cid);
  if (rec && IsOpen(*rec)) {
    if (auto e = CheckClientId(*rec, id, cid)) return Reply(c, *e);
    return Ok(c, OrderJson(config_, *rec));
  }
  Defer(c, [this, account = c.account, m, id, cid = std::move(cid)](HistoryJob& j) {
    auto found = id ? history_->FindOrder(account, m, static_cast<OrderId>(*id))
                    : history_->FindOrderByClientId(account, m, cid);
    if (!found.ok()) return HistoryUnavailable(j, found.status());
    if (!*found) return JobReply(j, ApiError::NoSuchOrder());
    if (auto e = CheckClientId(**found, id, cid)) return JobReply(j, *e);
    JobReply(j, 200, OrderJson(config_, **found));
  });
}

namespace {

// The event canceling the order a cancel named. Canceling an order of a list
// cancels every order of the list, in the list's order; the answer is still
// the named order's, as on Binance. `client_id_of` gives an order's client
// order id (asked only when the cancel named none but a client order id).
// The first cancellation when none matches; null when there is none.
template <class ClientIdOf>
const Event* CanceledTarget(std::span<const Event> events, const engine::CancelOrder& cancel,
                            const ClientIdOf& client_id_of) {
  const Event* first = nullptr;
  for (const Event& e : events) {
    const auto* x = As<engine::OrderCanceled>(e);
    if (x == nullptr) continue;
    if (first == nullptr) first = &e;
    if (Raw(cancel.order_id) != 0
            ? x->order_id == cancel.order_id
            : client_id_of(x->order_id) == cancel.orig_client_order_id.view()) {
      return &e;
    }
  }
  return first;
}

}  // namespace

// The answer to a cancel, from the read side once the cancel is applied.
std::string Gateway::Impl::CanceledBody(AccountId account, MarketId market, OrderId id,
                                        std::string_view cancel_client_id, int64_t ms) {
  const auto rec = read_side_.FindOrder(account, market, id);
  if (!rec) return "{}";
  return CanceledOrderJson(config_, *rec, cancel_client_id, ms);
}

void Gateway::Impl::CancelOrderRoute(Ctx& c) {
  engine::CancelOrder cancel;
  // The engine finds the order (both ids: they must name the same order),
  // so an order placed a moment ago is found before the read side shows it.
  if (auto e = ParseCancel(c.params, config_, c.account, &cancel)) return Reply(c, *e);
  // The cancel's own client order id (Binance's newClientOrderId of DELETE).
  std::string new_cid;
  if (auto e = CancelClientId(c.params, "newClientOrderId", &new_cid)) return Reply(c, *e);
  SubmitCancel(c, cancel, std::move(new_cid),
               [](Pending& p, std::string body) { p.Reply(200, std::move(body)); });
}

void Gateway::Impl::SubmitCancel(Ctx& c, const engine::CancelOrder& cancel, std::string new_cid,
                                 std::function<void(Pending&, std::string)> done) {
  engine::Command cmd;
  cmd.body = cancel;
  Submit(c, "cancel", cmd, [this, cancel, new_cid, done](Pending& p) {
    if (const engine::Rejected* r = FirstReject(p.events)) {
      return p.Fail(ApiError::FromReject(engine::CommandType::kCancelOrder, r->reason));
    }
    const Event* e = CanceledTarget(p.events, cancel, [&](OrderId id) {
      const auto rec = read_side_.FindOrder(cancel.account, cancel.market, id);
      return rec ? std::string(rec->client_order_id.view()) : std::string();
    });
    if (e == nullptr) return p.Fail(ApiError::Unknown("cancel produced no cancellation"));
    done(p, CanceledBody(cancel.account, cancel.market,
                         std::get<engine::OrderCanceled>(e->body).order_id, new_cid,
                         e->timestamp_ns / 1'000'000));
  });
}

void Gateway::Impl::CancelAllRoute(Ctx& c) {
  MarketId m{};
  if (auto e = SymbolParam(c, &m)) return Reply(c, *e);
  engine::Command cmd;
  cmd.body = engine::CancelAll{c.account, m};
  const AccountId account = c.account;
  Submit(c, "cancel_all", cmd, [this, account, m](Pending& p) {
    if (const engine::Rejected* r = FirstReject(p.events)) {
      return p.Fail(ApiError::FromReject(engine::CommandType::kCancelAll, r->reason));
    }
    std::string body = "[";
    for (const Event& e : p.events) {
      if (const auto* x = As<engine::OrderCanceled>(e)) {
        if (body.size() > 1) body += ',';
        body += CanceledBody(account, m, x->order_id, NewClientId(), e.timestamp_ns / 1'000'000);
      }
    }
    body += ']';
    p.Reply(200, std::move(body));
  });
}

// cancelReplace: one engine command (engine::CancelReplace) cancels and,
// if the cancel succeeded or always with cancelReplaceMode=ALLOW_FAILURE,
// places the new order, with no other command between the two. Answers as
// Binance does: both done 200; one failed 409 -2021 "Order cancel-replace
// partially failed."; the cancel failed and the order was not attempted,
// or both failed, 400 -2022 "Order cancel-replace failed."; data holds each
// side's answer or error.
void Gateway::Impl::CancelReplace(Ctx& c) {
  std::string_view mode;
  if (auto e = c.params.Require("cancelReplaceMode", &mode)) return Reply(c, *e);
  if (mode != "STOP_ON_FAILURE" && mode != "ALLOW_FAILURE") {
    return Reply(c, ApiError::BadParam("cancelReplaceMode", "STOP_ON_FAILURE or ALLOW_FAILURE"));
  }
  MarketId m{};
  if (auto e = SymbolParam(c, &m)) return Reply(c, *e);
  engine::CancelReplace cr;
  cr.mode = mode == "ALLOW_FAILURE" ? engine::CancelReplaceMode::kAllowFailure
                                    : engine::CancelReplaceMode::kStopOnFailure;
  cr.cancel.account = c.account;
  cr.cancel.market = m;
  // Both ids: the engine requires that they name the same order.
  if (auto e =
          ParseCancelTarget(c.params, "cancelOrderId", "cancelOrigClientOrderId", &cr.cancel)) {
    if (e->code != -2011) return Reply(c, *e);
    // An id no order can have: the cancel fails as the engine would fail
    // it (naming nothing), and the new order follows the mode.
    cr.cancel.order_id = OrderId{0};
    cr.cancel.orig_client_order_id = ClientOrderId{};
  }
  std::string cancel_cid;
  if (auto e = CancelClientId(c.params, "cancelNewClientOrderId", &cancel_cid)) {
    return Reply(c, *e);
  }
  NewOrder order;
  if (auto e = ParseNewOrder(c.params, config_, c.account, &order, options_.market_rules)) {
    return Reply(c, *e);
  }
  if (engine::IsConditional(order.place.type)) {
    // MAX_NUM_ALGO_ORDERS, checked up front: the order this request cancels
    // does not count when it is one of the waiting ones.
    std::size_t waiting = read_side_.WaitingOrders(c.account, m);
    const std::optional<marketdata::OrderRecord> target =
        Raw(cr.cancel.order_id) != 0 ? read_side_.FindOrder(c.account, m, cr.cancel.order_id)
        : !cr.cancel.orig_client_order_id.empty()
            ? read_side_.FindOrderByClientId(c.account, m, cr.cancel.orig_client_order_id.view())
            : std::nullopt;
    if (target && marketdata::Waiting(*target) && waiting > 0) --waiting;
    if (waiting >= RulesOf(options_.market_rules, m).max_num_algo_orders) {
      return Reply(c, ApiError::NewOrderRejected("Filter failure: MAX_NUM_ALGO_ORDERS"));
    }
  }
  if (order.client_order_id.empty()) {
    order.client_order_id = "mb-" + RandomToken(22);
    (void)order.place.client_order_id.Assign(order.client_order_id);
  }
  cr.place = order.place;
  engine::Command cmd;
  cmd.body = cr;
  Submit(
      c, "cancel_replace", cmd,
      [this, cancel = cr.cancel, cancel_cid, place = order.place, resp = order.resp](Pending& p) {
        // The cancel's event comes first, then the new order's, if it
        // was attempted.
        const std::span<const Event> events(p.events);
        std::string cancel_json;
        bool cancel_ok = false;
        if (As<engine::OrderCanceled>(events.front()) != nullptr) {
          // An order of a list takes the list with it: the named one answers.
          const Event* x = CanceledTarget(events, cancel, [&](OrderId id) {
            const auto rec = read_side_.FindOrder(cancel.account, cancel.market, id);
            return rec ? std::string(rec->client_order_id.view()) : std::string();
          });
          cancel_json = CanceledBody(cancel.account, cancel.market,
                                     std::get<engine::OrderCanceled>(x->body).order_id, cancel_cid,
                                     x->timestamp_ns / 1'000'000);
          cancel_ok = true;
        } else if (const auto* r = As<engine::Rejected>(events.front())) {
          cancel_json = ApiError::FromReject(engine::CommandType::kCancelOrder, r->reason).Json();
        }
        const std::span<const Event> placed = events.subspan(1);
        if (placed.empty()) {
          return p.Reply(400, ReplaceFailed(cancel_json, "NOT_ATTEMPTED", "null"));
        }
        auto done = [cancel_ok, cancel_json](Pending& q, std::string body) {
          if (!cancel_ok) return q.Reply(409, ReplacePartial(false, cancel_json, body));
          q.Reply(200, fmt::format(R"({{"cancelResult":"SUCCESS","newOrderResult":"SUCCESS",)"
                                   R"("cancelResponse":{},"newOrderResponse":{}}})",
                                   cancel_json, body));
        };
        // The new order refused: a partial failure when the cancel went
        // through, a failure otherwise.
        auto refused = [cancel_ok, cancel_json](Pending& q, const ApiError& e) {
          if (cancel_ok) return q.Reply(409, ReplacePartial(true, cancel_json, e.Json()));
          q.Reply(400, ReplaceFailed(cancel_json, "FAILURE", e.Json()));
        };
        if (const engine::Rejected* r = FirstReject(placed)) {
          return AnswerReject(p, place, *r, resp, done, refused);
        }
        std::vector<marketdata::Fill> fills;
        const marketdata::OrderRecord rec = OrderFromEvents(config_, placed, &fills);
        done(p, NewOrderJson(config_, rec, fills, resp, placed.front().timestamp_ns / 1'000'000));
      });
}

// cancelReplace's -2022: the cancel failed; the new order `new_result`
// (NOT_ATTEMPTED or FAILURE) with `new_json` (null or its error).
std::string Gateway::Impl::ReplaceFailed(const std::string& cancel_json,
                                         std::string_view new_result, std::string_view new_json) {
  return fmt::format(R"({{"code":-2022,"msg":"Order cancel-replace failed.",)"
                     R"("data":{{"cancelResult":"FAILURE","newOrderResult":"{}",)"
                     R"("cancelResponse":{},"newOrderResponse":{}}}}})",
                     new_result, cancel_json, new_json);
}

// cancelReplace's -2021: one side succeeded (the cancel when cancel_ok).
std::string Gateway::Impl::ReplacePartial(bool cancel_ok, const std::string& cancel_json,
                                          std::string_view new_json) {
  return fmt::format(R"({{"code":-2021,"msg":"Order cancel-replace partially failed.",)"
                     R"("data":{{"cancelResult":"{}","newOrderResult":"{}",)"
                     R"("cancelResponse":{},"newOrderResponse":{}}}}})",
                     cancel_ok ? "SUCCESS" : "FAILURE", cancel_ok ? "FAILURE" : "SUCCESS",
                     cancel_json, new_json);
}

// PUT /api/v3/order/amend/keepPriority: reduce an open order's quantity
// keeping its place in the queue (newQty = the new total quantity). The
// engine names the order and decides (it exists, newQty is below its
// quantity), so an order placed a moment ago can be amended before the read
// side shows it.
void Gateway::Impl::AmendKeepPriority(Ctx& c) {
  MarketId m{};
  if (auto e = SymbolParam(c, &m)) return Reply(c, *e);
  std::optional<uint64_t> id;
  if (auto e = c.params.GetUint("orderId", &id)) return Reply(c, *e);
  const std::optional<std::string_view> orig = c.params.Get("origClientOrderId");
  if (!id && !orig) return Reply(c, ApiError::MandatoryMissing("orderId"));
  engine::AmendOrder amend;
  amend.account = c.account;
  amend.market = m;
  amend.keep_priority = true;
  // Order ids start at 1; an id no order can have names no order.
  if (id && *id == 0) return Reply(c, ApiError::AmendRejected("Unknown order sent."));
  if (id) amend.order_id = static_cast<OrderId>(*id);
  if (orig && !amend.orig_client_order_id.Assign(*orig)) {
    return Reply(c, ApiError::AmendRejected("Unknown order sent."));
  }
  std::string_view text;
  if (auto e = c.params.Require("newQty", &text)) return Reply(c, *e);
  const engine::MarketSpec& spec = config_.markets[static_cast<std::size_t>(m)];
  const int base_scale = config_.assets[static_cast<std::size_t>(spec.base)].scale;
  int64_t units = 0;
  if (TryParseDecimal(text, base_scale, false, &units) != DecimalError::kOk) {
    return Reply(c, ApiError::TooMuchPrecision("newQty"));
  }
  if (units <= 0 || units % spec.lot_units != 0)
    return Reply(c, ApiError::FilterFailure("LOT_SIZE"));
  amend.new_qty = Qty{units / spec.lot_units};
  // newClientOrderId: the amended order's new client order id (the engine
  // refuses one another open order holds); without it the order keeps its
  // own.
  if (c.params.Has("newClientOrderId")) {
    std::string new_cid;
    if (auto e = CancelClientId(c.params, "newClientOrderId", &new_cid)) return Reply(c, *e);
    (void)amend.new_client_order_id.Assign(new_cid);
  }
  // The id before the amend, for origClientOrderId: the one sent, else the
  // one the read side shows now.
  std::string before(orig.value_or(std::string_view()));
  if (before.empty() && id) {
    if (const auto rec = read_side_.FindOrder(c.account, m, static_cast<OrderId>(*id))) {
      before = std::string(rec->client_order_id.view());
    }
  }
  engine::Command cmd;
  cmd.body = amend;
  const AccountId account = c.account;
  Submit(c, "amend", cmd, [this, account, m, before](Pending& p) {
    if (const engine::Rejected* r = FirstReject(p.events)) {
      return p.Fail(ApiError::FromReject(engine::CommandType::kAmendOrder, r->reason));
    }
    for (const Event& e : p.events) {
      const auto* a = As<engine::OrderAmended>(e);
      if (a == nullptr) continue;
      // Answered once the read side shows the amend.
      const auto rec = read_side_.FindOrder(account, m, a->order_id);
      if (!rec) return p.Fail(ApiError::NoSuchOrder());
      const bool renamed = std::any_of(p.events.begin(), p.events.end(), [](const Event& ev) {
        return ev.type() == engine::EventType::kClientOrderIdChanged;
      });
      return p.Reply(
          200, AmendedOrderJson(config_, *rec,
                                renamed ? std::string_view(before) : rec->client_order_id.view(),
                                e.timestamp_ns / 1'000'000, static_cast<uint64_t>(p.seq)));
    }
    p.Fail(ApiError::Unknown("amend produced no amendment"));
  });
}

std::string Gateway::Impl::OrdersJson(std::span<const marketdata::OrderRecord> orders) const {
  std::string body = "[";
  for (std::size_t i = 0; i < orders.size(); ++i) {
    if (i > 0) body += ',';
    body += OrderJson(config_, orders[i]);
  }
  body += ']';
  return body;
}

void Gateway::Impl::OpenOrders(Ctx& c) {
  std::optional<MarketId> market;
  if (auto s = c.params.Get("symbol")) {
    MarketId m{};
    if (auto e = FindMarket(config_, *s, &m)) return Reply(c, *e);
    market = m;
  }
  const auto orders = read_side_.OpenOrders(c.account, market);
  Ok(c, OrdersJson(orders));
}

// The history's form of the filters.
HistoryFilter Gateway::Impl::Filter(const Ctx& c, const HistoryQuery& q, uint64_t order_id) {
  HistoryFilter s;
  s.account = c.account;
  s.market = q.market;
  s.order_id = order_id;
  s.from_id = q.from.value_or(0);
  s.start_ms = q.start.value_or(0);
  s.end_ms = q.end.value_or(0);
  s.limit = q.limit;
  return s;
}

// allOrders / myTrades: Binance looks up at most 24 hours at once.
std::optional<ApiError> Gateway::Impl::AccountHistoryWindow(const HistoryQuery& q) {
  constexpr int64_t kMaxWindowMs = 24 * 3'600'000;
  if (q.start && q.end && static_cast<int128>(*q.end) - *q.start > kMaxWindowMs) {
    return ApiError{400, -1127, "More than 24 hours between startTime and endTime."};
  }
  return std::nullopt;
}

void Gateway::Impl::AllOrders(Ctx& c) {
  HistoryQuery q;
  if (auto e = ParseHistory(c, "orderId", &q)) return Reply(c, *e);
  if (auto e = AccountHistoryWindow(q)) return Reply(c, *e);
  if (history_ != nullptr) {
    return Defer(c, [this, f = Filter(c, q, 0)](HistoryJob& j) {
      auto orders = history_->AllOrders(f);
      if (!orders.ok()) return HistoryUnavailable(j, orders.status());
      JobReply(j, 200, OrdersJson(*orders));
    });
  }
  const auto orders = read_side_.AllOrders(c.account, q.market, q.from.value_or(0),
                                           q.start.value_or(0), q.end.value_or(0), q.limit);
  Ok(c, OrdersJson(orders));
}

void Gateway::Impl::MyTrades(Ctx& c) {
  HistoryQuery q;
  std::optional<uint64_t> order;
  if (auto e = ParseHistory(c, "fromId", &q)) return Reply(c, *e);
  if (auto e = c.params.GetUint("orderId", &order)) return Reply(c, *e);
  if (auto e = AccountHistoryWindow(q)) return Reply(c, *e);
  // Binance's combinations: symbol, with orderId [+ fromId], fromId,
  // startTime and/or endTime; a time bound with an id bound is refused.
  if ((order || q.from) && (q.start || q.end)) return Reply(c, ApiError::BadParamCombination());
  if (history_ != nullptr) {
    return Defer(c, [this, f = Filter(c, q, order.value_or(0))](HistoryJob& j) {
      auto fills = history_->MyTrades(f);
      if (!fills.ok()) return HistoryUnavailable(j, fills.status());
      JobReply(j, 200, MyTradesJson(config_, *fills));
    });
  }
  const auto fills = read_side_.MyTrades(c.account, q.market, order.value_or(0), q.from.value_or(0),
                                         q.start.value_or(0), q.end.value_or(0), q.limit);
  Ok(c, MyTradesJson(config_, fills));
}

// --- order lists ---

void Gateway::Impl::OrderListOco(Ctx& c) {
  NewOrderList list;
  if (auto e = ParseOcoList(c.params, config_, c.account, &list, options_.market_rules)) {
    return Reply(c, *e);
  }
  SubmitList(c, list);
}

void Gateway::Impl::OrderListOto(Ctx& c) {
  NewOrderList list;
  if (auto e = ParseOtoList(c.params, config_, c.account, &list, options_.market_rules)) {
    return Reply(c, *e);
  }
  SubmitList(c, list);
}

void Gateway::Impl::OrderListOtoco(Ctx& c) {
  NewOrderList list;
  if (auto e = ParseOtocoList(c.params, config_, c.account, &list, options_.market_rules)) {
    return Reply(c, *e);
  }
  SubmitList(c, list);
}

std::string Gateway::Impl::ListAnswer(const marketdata::ListRecord& l, RespType resp, int64_t ms,
                                      bool with_reports, std::string_view cancel_client_id) {
  std::vector<std::string> reports;
  if (with_reports) {
    for (std::size_t k = 0; k < l.size(); ++k) {
      const auto rec = read_side_.FindOrder(l.account, l.market, l.orders[k]);
      if (!rec) continue;
      if (!cancel_client_id.empty()) {
        reports.push_back(CanceledOrderJson(config_, *rec, cancel_client_id, ms));
        continue;
      }
      const auto fills = read_side_.MyTrades(l.account, l.market, Raw(l.orders[k]), 0, 0, 0,
                                             options_.read_side.history_trades);
      reports.push_back(NewOrderJson(config_, *rec,
                                     resp == RespType::kFull ? fills : decltype(fills){},
                                     resp == RespType::kAck ? RespType::kResult : resp, ms));
    }
  }
  return OrderListJson(config_, l, reports, ms, with_reports);
}

std::string Gateway::Impl::ListsJson(std::span<const marketdata::ListRecord> lists) {
  std::string body = "[";
  for (std::size_t i = 0; i < lists.size(); ++i) {
    if (i > 0) body += ',';
    body += ListAnswer(lists[i], RespType::kAck, lists[i].time_ns / 1'000'000, false);
  }
  body += ']';
  return body;
}

// One engine command places the whole list or nothing; the answer comes from
// the read side once it shows the list (its orders' reports: RESULT / FULL
// shapes; ACK: no orderReports).
void Gateway::Impl::SubmitList(Ctx& c, const NewOrderList& list) {
  const auto snap = Snap(list.place.market);
  if (snap->status != MarketStatus::kTrading) {
    return Reply(c, ApiError::FromReject(engine::CommandType::kPlaceOrderList,
                                         engine::RejectReason::kMarketNotTrading));
  }
  engine::Command cmd;
  cmd.body = list.place;
  const AccountId account = c.account;
  Submit(c, "order_list", cmd, [this, account, resp = list.resp](Pending& p) {
    if (const engine::Rejected* r = FirstReject(p.events)) {
      return p.Fail(ApiError::FromReject(engine::CommandType::kPlaceOrderList, r->reason));
    }
    for (const Event& e : p.events) {
      const auto* a = As<engine::ListAccepted>(e);
      if (a == nullptr) continue;
      const auto l = read_side_.FindList(account, a->list_id);
      if (!l) return p.Fail(ApiError::Unknown("order list not found"));
      return p.Reply(200, ListAnswer(*l, resp, e.timestamp_ns / 1'000'000, resp != RespType::kAck));
    }
    p.Fail(ApiError::Unknown("order list produced no list"));
  });
}

void Gateway::Impl::CancelOrderListRoute(Ctx& c) {
  engine::CancelOrderList cancel;
  if (auto e = ParseCancelList(c.params, config_, c.account, &cancel)) return Reply(c, *e);
  std::string new_cid;
  if (auto e = CancelClientId(c.params, "newClientOrderId", &new_cid)) return Reply(c, *e);
  engine::Command cmd;
  cmd.body = cancel;
  const AccountId account = c.account;
  Submit(c, "cancel_order_list", cmd, [this, account, new_cid](Pending& p) {
    if (const engine::Rejected* r = FirstReject(p.events)) {
      return p.Fail(ApiError::FromReject(engine::CommandType::kCancelOrderList, r->reason));
    }
    for (const Event& e : p.events) {
      const auto* d = As<engine::ListDone>(e);
      if (d == nullptr) continue;
      const auto l = read_side_.FindList(account, d->list_id);
      if (!l) return p.Fail(ApiError::Unknown("order list not found"));
      return p.Reply(200,
                     ListAnswer(*l, RespType::kResult, e.timestamp_ns / 1'000'000, true, new_cid));
    }
    p.Fail(ApiError::Unknown("cancel produced no list cancellation"));
  });
}

// GET /api/v3/orderList: orderListId or origClientOrderId (the list client
// order id); -2013 "Order list does not exist." for a list neither the read
// side (an open one) nor the history (any other) holds. Without a history,
// the read side's lists only.
void Gateway::Impl::GetOrderList(Ctx& c) {
  std::optional<uint64_t> id;
  if (auto e = c.params.GetUint("orderListId", &id)) return Reply(c, *e);
  const std::optional<std::string_view> cid = c.params.Get("origClientOrderId");
  if (!id && (!cid || cid->empty())) {
    return Reply(c, ApiError{400, -1102,
                             "Param 'origClientOrderId' or 'orderListId' must be sent, but both "
                             "were empty/null!"});
  }
  const auto l =
      id ? read_side_.FindList(c.account, *id) : read_side_.FindListByClientId(c.account, *cid);
  // An open list restored from a snapshot has no client ids on the read side
  // (the image keeps hashes; a list placed through the API always has a list
  // client order id): the history holds them.
  if (history_ == nullptr ||
      (l && l->status == marketdata::ListStatus::kExecuting && !l->list_client_order_id.empty())) {
    if (!l) return Reply(c, ApiError{400, -2013, "Order list does not exist."});
    return Ok(c, ListAnswer(*l, RespType::kAck, l->time_ns / 1'000'000, false));
  }
  Defer(c, [this, account = c.account, id, cid = std::string(cid.value_or(""))](HistoryJob& j) {
    auto found = id ? history_->FindOrderList(account, *id)
                    : history_->FindOrderListByClientId(account, cid);
    if (!found.ok()) return HistoryUnavailable(j, found.status());
    if (!*found) return JobReply(j, ApiError{400, -2013, "Order list does not exist."});
    JobReply(j, 200, ListAnswer(**found, RespType::kAck, (*found)->time_ns / 1'000'000, false));
  });
}

void Gateway::Impl::OpenOrderLists(Ctx& c) { Ok(c, ListsJson(read_side_.OpenLists(c.account))); }

// GET /api/v3/allOrderList: fromId, or startTime / endTime (at most 24 h
// apart), limit (default 500, at most 1000), from the history when there is
// one, else from the read side's lists.
void Gateway::Impl::AllOrderLists(Ctx& c) {
  std::optional<uint64_t> from;
  std::optional<int64_t> start, end;
  std::size_t limit = 0;
  if (auto e = c.params.GetUint("fromId", &from)) return Reply(c, *e);
  if (auto e = c.params.GetInt("startTime", &start)) return Reply(c, *e);
  if (auto e = c.params.GetInt("endTime", &end)) return Reply(c, *e);
  if (auto e = LimitParam(c, 500, 1000, &limit)) return Reply(c, *e);
  if (from && (start || end)) return Reply(c, ApiError::BadParamCombination());
  HistoryQuery q;
  q.start = start;
  q.end = end;
  if (auto e = AccountHistoryWindow(q)) return Reply(c, *e);
  if (history_ != nullptr) {
    HistoryFilter f;
    f.account = c.account;
    f.from_id = from.value_or(0);
    f.start_ms = start.value_or(0);
    f.end_ms = end.value_or(0);
    f.limit = limit;
    return Defer(c, [this, f](HistoryJob& j) {
      auto lists = history_->AllOrderLists(f);
      if (!lists.ok()) return HistoryUnavailable(j, lists.status());
      JobReply(j, 200, ListsJson(*lists));
    });
  }
  Ok(c, ListsJson(read_side_.AllLists(c.account, from.value_or(0), start.value_or(0),
                                      end.value_or(0), limit)));
}

void Gateway::Impl::Account(Ctx& c) {
  const auto balances = read_side_.Balances(c.account);
  Ok(c, AccountJson(config_, c.account, balances,
                    read_side_.account_update_ns(c.account) / 1'000'000));
}

void Gateway::Impl::ListenKeyCreate(Ctx& c) {
  Ok(c, fmt::format(R"({{"listenKey":"{}"}})", streams_.CreateListenKey(c.account)));
}

void Gateway::Impl::ListenKeyKeepAlive(Ctx& c) {
  std::string_view key;
  if (auto e = c.params.Require("listenKey", &key)) return Reply(c, *e);
  if (!streams_.KeepAliveListenKey(c.account, key)) {
    return Reply(c, ApiError{400, -1125, "This listenKey does not exist."});
  }
  Ok(c, "{}");
}

void Gateway::Impl::ListenKeyClose(Ctx& c) {
  std::string_view key;
  if (auto e = c.params.Require("listenKey", &key)) return Reply(c, *e);
  if (!streams_.CloseListenKey(c.account, key)) {
    return Reply(c, ApiError{400, -1125, "This listenKey does not exist."});
  }
  Ok(c, "{}");
}

}  // namespace mb::gateway
