#include "transfer/dispatcher.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <optional>
#include <utility>

#include "common/decimal.h"
#include "log/log.h"
#include "metrics/metrics.h"
#include "net/stream.h"
#include "transfer/address.h"

namespace mb::transfer {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;

namespace {

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr int64_t kFirstBackoffNs = 100'000'000;  // 100 ms, doubling

}  // namespace

struct Dispatcher::Item {
  Delivery delivery;
  Link* link = nullptr;  // null: no link to its venue
  int64_t held_ns = 0;   // the TransferHeld's time (wall)
  enum class State : uint8_t { kQueued, kSending, kResolving } state = State::kQueued;
};

struct Dispatcher::Link {
  struct Endpoint {
    std::string host, port;
    std::string url;                        // "http(s)://host:port", for messages
    std::string authority;                  // "host:port", the Host header
    std::shared_ptr<wire::TlsContext> tls;  // https:// (null: plain)
  };
  VenueLink venue;
  std::vector<Endpoint> endpoints;  // venue.url's, in order (immutable)
  std::size_t current = 0;          // the one calls go to: the primary found last
  bool probe_due = false;           // several URLs: the next call probes first
  bool no_primary = false;          // the last probe found none (logged once)
  std::condition_variable cv;
  std::deque<uint64_t> queue;   // ids to send, oldest first (stale ids are skipped)
  uint64_t pending = 0;         // items of this link
  uint64_t in_flight = 0;       // being sent or resolved
  int64_t next_attempt_ns = 0;  // steady; 0: now
  int64_t backoff_ns = 0;
  uint64_t calls = 0, credited = 0, rejected = 0, retried = 0, errors = 0;
  std::string last_error;
  int64_t last_success_ms = 0;
  bool failing = false;  // logged once per outage
};

// One worker's connection: its own io_context, used synchronously (each
// operation runs until done or until the stream's deadline closes it).
struct Dispatcher::Conn {
  asio::io_context io;
  tcp::resolver resolver{io};
  std::optional<wire::Stream> stream;  // made anew for each connection
  beast::flat_buffer buffer;
  bool open = false;
  std::size_t endpoint = 0;  // the link's endpoint it is open to
};

Result<std::unique_ptr<Dispatcher>> Dispatcher::Create(const engine::EngineConfig& config,
                                                       DispatchOptions options) {
  for (std::size_t i = 0; i < options.venues.size(); ++i) {
    const VenueLink& v = options.venues[i];
    if (v.name == options.venue) {
      return InvalidArgument(fmt::format("venues: \"{}\" is this venue's own name", v.name));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (options.venues[j].name == v.name) {
        return InvalidArgument(fmt::format("venues: \"{}\" is listed twice", v.name));
      }
    }
    if (v.secret.size() < 16) {
      return InvalidArgument(
          fmt::format("venues.{}.secret: at least 16 characters (it signs every call)", v.name));
    }
    std::vector<bool> tls;
    auto urls = ParseHttpUrls(v.url, fmt::format("venues.{}.url", v.name), "the venue's API", &tls);
    if (!urls.ok()) return urls.status();
    if (std::find(tls.begin(), tls.end(), true) != tls.end()) {
      auto ctx = wire::MakeClientTlsContext(v.ca_file);
      if (!ctx.ok()) {
        return Status(ctx.status().code(),
                      fmt::format("venues.{}.ca_file: {}", v.name, ctx.status().message()));
      }
    }
  }
  options.batch = std::clamp<uint32_t>(options.batch, 1, static_cast<uint32_t>(kMaxBatch));
  options.window = std::max(options.window, options.batch);
  return std::unique_ptr<Dispatcher>(new Dispatcher(config, std::move(options)));
}

Dispatcher::Dispatcher(const engine::EngineConfig& config, DispatchOptions options)
    : config_(config), options_(std::move(options)) {
  for (const VenueLink& v : options_.venues) {
    auto link = std::make_unique<Link>();
    link->venue = v;
    std::vector<bool> tls;
    auto urls = ParseHttpUrls(v.url, "url", "", &tls);
    std::shared_ptr<wire::TlsContext> context;
    if (std::find(tls.begin(), tls.end(), true) != tls.end()) {
      context = std::move(*wire::MakeClientTlsContext(v.ca_file));  // checked by Create
    }
    for (std::size_t i = 0; i < urls->size(); ++i) {
      auto& [host, port] = (*urls)[i];
      std::string authority = host.find(':') == std::string::npos
                                  ? fmt::format("{}:{}", host, port)
                                  : fmt::format("[{}]:{}", host, port);
      std::string url = fmt::format("{}://{}", tls[i] ? "https" : "http", authority);
      link->endpoints.push_back(Link::Endpoint{std::move(host), std::move(port), std::move(url),
                                               std::move(authority), tls[i] ? context : nullptr});
    }
    link->probe_due = link->endpoints.size() > 1;
    links_.push_back(std::move(link));
  }
  metrics::Registry* r = options_.metrics;
  if (r == nullptr) return;
  completion_ = &r->AddHistogram(
      "matchbook_transfer_completion_seconds",
      "Transfers to other venues: from the hold to the durable completion, by the journal's times");
  for (const auto& l : links_) {
    Link* link = l.get();
    const metrics::Labels labels{{"venue", link->venue.name}};
    auto read = [this](auto f) {
      return [this, f] {
        std::lock_guard lock(mu_);
        return static_cast<double>(f());
      };
    };
    r->AddGauge("matchbook_transfers_pending", "Transfers to the venue not yet resolved", labels,
                read([link] { return link->pending; }));
    r->AddCounterFn("matchbook_transfer_calls_total", "Calls made to the venue", labels,
                    read([link] { return link->calls; }));
    r->AddCounterFn("matchbook_transfer_errors_total",
                    "Calls to the venue that failed (unreachable, refused, bad answer)", labels,
                    read([link] { return link->errors; }));
    r->AddCounterFn("matchbook_transfers_credited_total", "Transfers the venue credited", labels,
                    read([link] { return link->credited; }));
    r->AddCounterFn("matchbook_transfers_rejected_total", "Transfers the venue refused", labels,
                    read([link] { return link->rejected; }));
  }
}

Dispatcher::~Dispatcher() { Stop(); }

void Dispatcher::Wire(exchange::ExchangeOptions* options, fanout::Stage* stage) {
  auto previous = std::move(options->on_recovered);
  options->on_recovered = [this, previous](const engine::Engine& engine) {
    if (previous) previous(engine);
    for (const engine::PendingTransfer& t : engine.PendingTransfers()) {
      Add(Raw(t.id), t, 0);
    }
  };
  stage->Add(this);
}

void Dispatcher::Start(exchange::Exchange* exchange) {
  exchange_ = exchange;
  std::lock_guard lock(mu_);
  for (const auto& l : links_) {
    const uint32_t workers =
        options_.mode == DispatchMode::kSequential
            ? 1
            : std::min<uint32_t>(16, (options_.window + options_.batch - 1) / options_.batch);
    for (uint32_t i = 0; i < workers; ++i) {
      threads_.emplace_back([this, link = l.get()] { Work(link); });
    }
    log::Info("transfers", "link to " + l->venue.name,
              {{"url", l->venue.url},
               {"mode", options_.mode == DispatchMode::kSequential ? "sequential" : "pipelined"},
               {"workers", std::to_string(workers)},
               {"pending", std::to_string(l->pending)}});
  }
}

void Dispatcher::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    for (const auto& l : links_) l->cv.notify_all();
    // A call in flight ends now, not at its deadline.
    for (Conn* c : conns_) {
      asio::post(c->io, [c] {
        c->resolver.cancel();
        if (c->stream) c->stream->close();
      });
    }
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

bool Dispatcher::Linked(std::string_view venue) const noexcept {
  return std::any_of(links_.begin(), links_.end(),
                     [&](const auto& l) { return l->venue.name == venue; });
}

void Dispatcher::Add(uint64_t id, const engine::PendingTransfer& t, int64_t held_ns) {
  const engine::AssetSpec& asset = config_.assets[Raw(t.asset)];
  auto item = std::make_unique<Item>();
  item->delivery = Delivery{id, asset.symbol, FormatDecimal((t.amount - t.fee).value, asset.scale),
                            std::string(t.address.view())};
  item->held_ns = held_ns;
  auto address = ParseAddress(item->delivery.address);
  std::lock_guard lock(mu_);
  if (items_.count(id) != 0) return;
  for (const auto& l : links_) {
    if (address.ok() && l->venue.name == address->venue) item->link = l.get();
  }
  Item* it = item.get();
  items_.emplace(id, std::move(item));
  if (it->link == nullptr) {
    ++unroutable_;
    log::Warn("transfers",
              "a pending transfer names a venue with no link; void it or add the venue",
              {{"transfer", std::to_string(id)}, {"address", it->delivery.address}});
    return;
  }
  ++it->link->pending;
  it->link->queue.push_back(id);
  it->link->cv.notify_one();
}

void Dispatcher::Resolved(uint64_t id, int64_t resolved_ns, bool completed) {
  std::lock_guard lock(mu_);
  auto found = items_.find(id);
  if (found == items_.end()) return;
  Item& it = *found->second;
  if (completed && completion_ != nullptr && it.held_ns != 0) {
    completion_->RecordDelta(resolved_ns - it.held_ns);
  }
  if (it.link == nullptr) {
    --unroutable_;
  } else {
    --it.link->pending;
    if (it.state != Item::State::kQueued) --it.link->in_flight;
  }
  items_.erase(found);
}

void Dispatcher::OnBatch(const fanout::Batch& batch, bool) {
  for (const engine::Event& e : batch.events) {
    if (const auto* h = std::get_if<engine::TransferHeld>(&e.body)) {
      Add(Raw(h->transfer_id),
          engine::PendingTransfer{h->transfer_id, h->account, h->asset, h->amount, h->fee,
                                  h->address},
          e.timestamp_ns);
    } else if (const auto* c = std::get_if<engine::TransferCompleted>(&e.body)) {
      Resolved(Raw(c->transfer_id), e.timestamp_ns, true);
    } else if (const auto* r = std::get_if<engine::TransferRefunded>(&e.body)) {
      Resolved(Raw(r->transfer_id), e.timestamp_ns, false);
    }
  }
}

void Dispatcher::OnDone(uint64_t tag, const exchange::Outcome& outcome) noexcept {
  // Durable: the resolution's events reach OnBatch and end the transfer
  // (or, refused as kUnknownTransfer, something else resolved it first).
  if (outcome.state == exchange::Outcome::State::kDurable) return;
  std::lock_guard lock(mu_);
  Requeue(tag, true);
}

// REQUIRES: mu_ held.
void Dispatcher::Requeue(uint64_t id, bool front) {
  auto found = items_.find(id);
  if (found == items_.end() || found->second->link == nullptr) return;
  Item& it = *found->second;
  if (it.state == Item::State::kQueued) return;
  it.state = Item::State::kQueued;
  --it.link->in_flight;
  if (front) {
    it.link->queue.push_front(id);
  } else {
    it.link->queue.push_back(id);
  }
  it.link->cv.notify_one();
}

// REQUIRES: mu_ held. The link waits a little before its next call, without
// counting a failure (the destination or this venue is busy).
void Dispatcher::Pause(Link* link) {
  link->next_attempt_ns = std::max(link->next_attempt_ns, SteadyNs() + kFirstBackoffNs);
}

// REQUIRES: mu_ held. Several workers failing in one attempt window double
// the back-off once.
void Dispatcher::Failed(Link* link, const std::string& why) {
  ++link->errors;
  link->last_error = why;
  const int64_t now = SteadyNs();
  if (now < link->next_attempt_ns) return;
  link->backoff_ns =
      link->backoff_ns == 0
          ? kFirstBackoffNs
          : std::min<int64_t>(link->backoff_ns * 2, int64_t{options_.retry_max_ms} * 1'000'000);
  link->next_attempt_ns = now + link->backoff_ns;
  if (!link->failing) {
    link->failing = true;
    log::Warn("transfers", "venue " + link->venue.name + " cannot take transfers; retrying",
              {{"error", why}});
  }
}

void Dispatcher::Work(Link* link) {
  Conn conn;
  {
    std::lock_guard lock(mu_);
    conns_.push_back(&conn);
  }
  const std::size_t batch =
      options_.mode == DispatchMode::kSequential ? 1 : std::size_t{options_.batch};
  std::vector<uint64_t> ids;
  std::vector<Delivery> deliveries;
  for (;;) {
    ids.clear();
    deliveries.clear();
    {
      std::unique_lock lock(mu_);
      for (;;) {
        if (stopping_) return;
        const int64_t now = SteadyNs();
        if (!link->queue.empty() && now >= link->next_attempt_ns) break;
        if (link->queue.empty()) {
          link->cv.wait(lock);
        } else {
          link->cv.wait_for(lock, std::chrono::nanoseconds(link->next_attempt_ns - now));
        }
      }
      while (!link->queue.empty() && ids.size() < batch) {
        const uint64_t id = link->queue.front();
        link->queue.pop_front();
        auto found = items_.find(id);
        if (found == items_.end() || found->second->state != Item::State::kQueued) continue;
        found->second->state = Item::State::kSending;
        ++link->in_flight;
        ids.push_back(id);
        deliveries.push_back(found->second->delivery);
      }
      ++link->calls;
    }
    if (ids.empty()) continue;
    Result<std::vector<DeliveryResult>> results = Call(link, &conn, deliveries);
    std::vector<engine::Command> resolutions;
    {
      std::lock_guard lock(mu_);
      if (!results.ok()) {
        Failed(link, results.status().message());
        for (auto id = ids.rbegin(); id != ids.rend(); ++id) Requeue(*id, true);
        continue;
      }
      if (link->failing) {
        link->failing = false;
        log::Info("transfers", "venue " + link->venue.name + " takes transfers again");
      }
      link->backoff_ns = 0;
      link->next_attempt_ns = 0;
      link->last_success_ms = WallMs();
      for (const DeliveryResult& r : *results) {
        auto found = items_.find(r.id);
        if (found == items_.end() || found->second->state != Item::State::kSending ||
            found->second->link != link) {
          continue;  // not asked in this call: ignored
        }
        if (r.outcome == Outcome::kRetry) {
          // The destination is busy: again after a pause, not at once.
          ++link->retried;
          Requeue(r.id, false);
          Pause(link);
          continue;
        }
        found->second->state = Item::State::kResolving;
        engine::Command cmd;
        if (r.outcome == Outcome::kCredited) {
          ++link->credited;
          cmd.body =
              engine::ResolveTransfer{TransferId{r.id}, true, engine::RefundReason::kRefused};
        } else {
          ++link->rejected;
          log::Info("transfers", "venue " + link->venue.name + " refused a transfer; refunding",
                    {{"transfer", std::to_string(r.id)},
                     {"reason", std::string(ReasonCode(r.reason))},
                     {"msg", r.msg}});
          cmd.body = engine::ResolveTransfer{TransferId{r.id}, false, r.reason};
        }
        resolutions.push_back(cmd);
      }
      // Anything the answer left out goes again, after a pause.
      for (uint64_t id : ids) {
        auto found = items_.find(id);
        if (found != items_.end() && found->second->state == Item::State::kSending) {
          Requeue(id, false);
          Pause(link);
        }
      }
    }
    for (const engine::Command& cmd : resolutions) {
      const uint64_t id = Raw(std::get<engine::ResolveTransfer>(cmd.body).transfer_id);
      const exchange::SubmitResult s = exchange_->Submit(cmd, this, id);
      if (s == exchange::SubmitResult::kOk) continue;
      // This venue's own ring is full or its journal refuses: delivered again
      // after a pause (the destination answers with its first credit). Not the
      // link's fault.
      std::lock_guard lock(mu_);
      Requeue(id, true);
      ++local_retries_;
      Pause(link);
    }
  }
}

// One request and its answer, under one deadline (timeout_ms), on the
// worker's connection (opened first when it is not). *connected: the
// connection was open or could be opened; *answered: some of the answer
// arrived. Stop() closes the connection from its thread: whatever runs here
// then ends with an error.
template <class Conn, class Endpoint>
Status Exchange(const Endpoint& to, uint32_t timeout_ms, Conn* conn,
                const http::request<http::string_body>& req, http::response<http::string_body>* res,
                bool* answered, bool* connected) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  beast::error_code ec;
  bool done = false;
  auto run = [&] {
    conn->io.restart();
    conn->io.run_until(deadline);
    if (!done) {  // past the deadline (or stopped): cancel, collect the handler
      conn->resolver.cancel();
      if (conn->stream) conn->stream->close();
      conn->io.restart();
      conn->io.run();
      if (!ec) ec = asio::error::timed_out;
    }
    done = false;
  };
  auto fail = [&](std::string_view what) {
    if (conn->stream) conn->stream->close();
    conn->open = false;
    conn->buffer.clear();
    return Unavailable(fmt::format("{} {}: {}", what, to.url, ec.message()));
  };
  if (!conn->open) {
    tcp::resolver::results_type endpoints;
    conn->resolver.async_resolve(to.host, to.port,
                                 [&](beast::error_code e, tcp::resolver::results_type r) {
                                   ec = e;
                                   endpoints = std::move(r);
                                   done = true;
                                 });
    run();
    if (ec) return fail("resolve");
    conn->stream.emplace(tcp::socket(conn->io), to.tls);
    conn->stream->expires_at(deadline);
    conn->stream->tcp_layer().async_connect(endpoints,
                                            [&](beast::error_code e, const tcp::endpoint&) {
                                              ec = e;
                                              done = true;
                                            });
    run();
    if (ec) return fail("connect");
    conn->stream->socket().set_option(tcp::no_delay(true));
    conn->stream->async_client_handshake(to.host, [&](beast::error_code e) {
      ec = e;
      done = true;
    });
    run();
    if (ec) return fail("TLS handshake with");
    conn->open = true;
  }
  *connected = true;
  conn->stream->expires_at(deadline);
  http::async_write(*conn->stream, req, [&](beast::error_code e, std::size_t) {
    ec = e;
    done = true;
  });
  run();
  if (ec) return fail("send to");
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  http::async_read(*conn->stream, conn->buffer, parser, [&](beast::error_code e, std::size_t n) {
    ec = e;
    done = true;
    *answered = n > 0 || parser.got_some();
  });
  run();
  if (ec) return fail("answer from");
  *res = parser.release();
  if (!res->keep_alive()) {
    if (conn->stream) conn->stream->close();
    conn->open = false;
  }
  return Status::Ok();
}

namespace {

// A connection no longer wanted (it is to another endpoint, or a probe's).
template <class Conn>
void CloseConn(Conn* conn) {
  if (conn->stream) conn->stream->close();
  conn->open = false;
  conn->buffer.clear();
}

}  // namespace

std::size_t Dispatcher::Probe(Link* link, Conn* conn) {
  const std::size_t none = link->endpoints.size();
  std::size_t found = none;
  for (std::size_t i = 0; i < link->endpoints.size(); ++i) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;
    }
    const Link::Endpoint& e = link->endpoints[i];
    http::request<http::string_body> req{http::verb::get, std::string(kPingTarget), 11};
    req.set(http::field::host, e.authority);
    req.keep_alive(false);
    http::response<http::string_body> res;
    bool answered = false, connected = false;
    CloseConn(conn);
    Status s = Exchange(e, options_.timeout_ms, conn, req, &res, &answered, &connected);
    if (s.ok() && res.result_int() == 200 && res[kRoleHeader] == kRolePrimary) {
      found = i;
      break;
    }
  }
  CloseConn(conn);
  std::lock_guard lock(mu_);
  if (found == none) {
    if (!link->no_primary) {
      link->no_primary = true;
      log::Warn("transfers", "venue " + link->venue.name + ": no URL's ping says primary",
                {{"url", link->endpoints[link->current].url}});
    }
    return link->current;
  }
  link->no_primary = false;
  if (found != link->current) {
    log::Info("transfers",
              "venue " + link->venue.name + ": its primary is now " + link->endpoints[found].url,
              {{"was", link->endpoints[link->current].url}});
    link->current = found;
  }
  return link->current;
}

Result<std::vector<DeliveryResult>> Dispatcher::Call(Link* link, Conn* conn,
                                                     const std::vector<Delivery>& deliveries) {
  std::size_t cur = 0;
  bool probe = false;
  {
    std::lock_guard lock(mu_);
    cur = link->current;
    probe = link->probe_due;
    link->probe_due = false;
  }
  if (probe) cur = Probe(link, conn);
  if (conn->open && conn->endpoint != cur) CloseConn(conn);
  const std::string body = EncodeDeliveries(deliveries);
  http::request<http::string_body> req{http::verb::post, std::string(kDeliverTarget), 11};
  req.set(http::field::host, link->endpoints[cur].authority);
  req.set(http::field::content_type, "application/json");
  req.set(kVenueHeader, options_.venue);
  req.keep_alive(true);
  req.body() = body;
  req.prepare_payload();
  // A kept-alive connection the destination closed while idle fails before
  // any answer: the call goes again at once on a new one (a delivery is
  // idempotent), not as an outage. Several URLs: a URL that cannot be
  // connected to or answers 503 may be the primary no more; once per call,
  // the call goes again at once to the primary a probe finds, if another.
  bool probed = false;
  for (int attempt = 0;; ++attempt) {
    const bool reused = conn->open;
    const std::string ts = std::to_string(WallMs());
    req.set(kTimestampHeader, ts);
    req.set(kSignatureHeader, Sign(link->venue.secret, ts, "POST", kDeliverTarget, body));
    http::response<http::string_body> res;
    bool answered = false, connected = false;
    conn->endpoint = cur;
    Status s =
        Exchange(link->endpoints[cur], options_.timeout_ms, conn, req, &res, &answered, &connected);
    if (!s.ok() && reused && !answered && attempt == 0) continue;
    if (link->endpoints.size() > 1 && !probed && (s.ok() ? res.result_int() == 503 : !connected)) {
      probed = true;
      std::size_t now = 0;
      {
        std::lock_guard lock(mu_);
        now = link->current;  // another worker may have probed already
      }
      if (now == cur) now = Probe(link, conn);
      if (now != cur) {
        cur = now;
        CloseConn(conn);
        req.set(http::field::host, link->endpoints[cur].authority);
        continue;
      }
    }
    if (!s.ok()) return s;
    if (res.result_int() != 200) {
      return Unavailable(fmt::format("{} answered {}: {}", link->endpoints[cur].url,
                                     res.result_int(), res.body().substr(0, 200)));
    }
    return DecodeResults(res.body());
  }
}

std::string Dispatcher::HealthJson() const {
  std::lock_guard lock(mu_);
  json::object venues;
  const int64_t now = SteadyNs();
  for (const auto& l : links_) {
    json::object o;
    o["url"] = l->venue.url;
    o["primary"] = l->endpoints[l->current].url;
    o["pending"] = l->pending;
    o["inFlight"] = l->in_flight;
    o["calls"] = l->calls;
    o["credited"] = l->credited;
    o["rejected"] = l->rejected;
    o["retried"] = l->retried;
    o["errors"] = l->errors;
    o["lastError"] = l->last_error;
    o["lastSuccessMs"] = l->last_success_ms;
    o["reachable"] = !l->failing;
    o["backoffMs"] = l->next_attempt_ns > now ? (l->next_attempt_ns - now) / 1'000'000 : 0;
    venues[l->venue.name] = std::move(o);
  }
  json::object out;
  out["venue"] = options_.venue;
  out["mode"] = options_.mode == DispatchMode::kSequential ? "sequential" : "pipelined";
  out["window"] = options_.window;
  out["batch"] = options_.batch;
  out["links"] = std::move(venues);
  out["unroutable"] = unroutable_;
  return json::serialize(out);
}

}  // namespace mb::transfer
