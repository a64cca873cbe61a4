// The gateway as a handler of the fan-out stage (thread mb-fanout): each
// durable batch to the read side and the streams, then the answers.
#include "gateway/gateway_impl.h"

namespace mb::gateway {

void Gateway::Impl::Finish(Pending* p) {
  if (p->state != exchange::Outcome::State::kDurable) {
    if (!p->acked) {
      p->http_status = 503;
      if (timing_) p->responded_ns = SteadyNs();
      Busy(p->respond, p->version, p->keep_alive, p->meta,
           p->state == exchange::Outcome::State::kRefusing ? exchange::SubmitResult::kRefusing
                                                           : exchange::SubmitResult::kClosed);
    }
  } else {
    p->finish(*p);
  }
  if (hist_response_ != nullptr && p->ingress_ns != 0 && p->responded_ns != 0) {
    hist_response_->RecordDelta(p->responded_ns - p->ingress_ns);
  }
  if (options_.flight_recorder != nullptr) {
    metrics::CommandTrace t;
    t.seq = static_cast<uint64_t>(p->seq);
    t.account = p->account;
    t.kind = p->kind;
    t.http_status = p->http_status;
    t.ingress_ns = p->ingress_ns;
    t.submitted_ns = p->times.submitted_ns;
    t.sequenced_ns = p->times.sequenced_ns;
    t.matched_ns = p->times.matched_ns;
    t.journaled_ns = p->times.journaled_ns;
    t.durable_ns = p->times.durable_ns;
    t.responded_ns = p->responded_ns;
    options_.flight_recorder->Record(t);
  }
  delete p;
}

// Fan-out thread: the durable events' orders, trades and cancels per market.
void Gateway::Impl::CountEvents(std::span<const Event> events) {
  for (const Event& e : events) {
    if (const auto* a = As<engine::OrderAccepted>(e)) {
      Count(a->terms.market, &MarketCounts::orders);
    } else if (const auto* t = As<engine::Trade>(e)) {
      Count(t->market, &MarketCounts::trades);
    } else if (const auto* x = As<engine::OrderCanceled>(e)) {
      Count(x->market, &MarketCounts::cancels);
    }
  }
}

void Gateway::Impl::LearnMarket(const engine::MarketAdded& m) {
  if (Raw(m.market) != config_.markets.size()) return;  // known
  market_counts_.emplace_back();
  streams_.AddMarket(m.symbol.view());
}

void Gateway::Impl::Learn(std::span<const Event> events) {
  for (const Event& e : events) {
    if (const auto* m = As<engine::MarketAdded>(e)) LearnMarket(*m);
    engine::LearnListing(&config_, e);
  }
}

void Gateway::Impl::Learn(const engine::EngineImage& image) {
  for (const engine::AssetAdded& a : image.added_assets) engine::LearnListing(&config_, a);
  for (const engine::MarketAdded& m : image.added_markets) {
    LearnMarket(m);
    engine::LearnListing(&config_, m);
  }
}

void Gateway::Impl::Count(MarketId m, std::atomic<uint64_t> MarketCounts::*field) {
  const auto i = static_cast<std::size_t>(m);
  if (i < market_counts_.size()) (market_counts_[i].*field).fetch_add(1, std::memory_order_relaxed);
}

// A Rejected event carries no order details; the gateway still holds the
// command (its request waits for this batch), so the user-data report of a
// rejected order says what was refused.
void Gateway::Impl::DescribeRejectedOrders(const fanout::Batch& batch,
                                           marketdata::BatchOutput* out) {
  for (marketdata::AccountUpdate& u : out->accounts) {
    for (marketdata::ExecutionReport& r : u.reports) {
      if (r.type != marketdata::ExecType::kRejected) continue;
      const Pending* p = nullptr;
      for (const fanout::Batch::Waiting& w : batch.answers) {
        if (w.seq != r.seq) continue;
        const auto* mine = dynamic_cast<const Pending*>(w.answer);
        if (mine != nullptr && mine->place) p = mine;
      }
      if (p == nullptr) continue;
      const engine::PlaceOrder& o = *p->place;
      r.order.terms.market = o.market;
      r.order.terms.side = o.side;
      r.order.terms.type = o.type;
      r.order.terms.tif = o.tif;
      r.order.terms.stp = o.stp;
      r.order.terms.price = o.price;
      r.order.terms.qty = o.qty;
      r.order.quote_qty = o.quote_qty;
      r.order.client_order_id = o.client_order_id;
    }
  }
}

// fanout::Handler: one durable batch — the read side, the streams, the
// counts; the stage then delivers the batch's answers.
void Gateway::Impl::OnBatch(const fanout::Batch& batch, bool) {
  if (batch.events.empty()) return;
  keys_->Apply(batch.events);
  read_side_.Apply(batch.events, &fan_out_);
  Learn(batch.events);
  DescribeRejectedOrders(batch, &fan_out_);
  streams_.Publish(fan_out_);
  if (options_.metrics != nullptr) {
    if (batch.published_ns != 0) hist_fanout_->RecordDelta(SteadyNs() - batch.published_ns);
    CountEvents(batch.events);
  }
}

// The throttled streams' clock: every round, at least every 10 ms.
void Gateway::Impl::OnRound() { streams_.Tick(clock_.wall_ms()); }

}  // namespace mb::gateway
