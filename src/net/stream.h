// A connection's bytes: plain TCP, or TLS over it — one type for the
// server's sessions (gateway/server.h) and the clients that call other
// servers (a replica's forwarder), so the code that reads and writes HTTP or
// WebSocket does not care which. The TCP stream's deadlines bound every read
// and write, TLS records included.
//
// Thread safety: one strand at a time, as Asio's streams.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <boost/beast/websocket/teardown.hpp>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "common/status.h"

namespace mb::wire {

using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;
using TlsContext = boost::asio::ssl::context;

// A client's connection must reach `host`: SNI for a name, and the peer's
// certificate must name it (a DNS name or an IP address).
void ExpectPeer(SSL* ssl, const std::string& host);

class Stream {
 public:
  using executor_type = boost::beast::tcp_stream::executor_type;

  explicit Stream(boost::asio::ip::tcp::socket socket) : plain_(std::in_place, std::move(socket)) {}
  // TLS over the socket (tls null: plain); the context stays alive with the
  // stream.
  Stream(boost::asio::ip::tcp::socket socket, std::shared_ptr<TlsContext> tls)
      : tls_ctx_(std::move(tls)) {
    if (tls_ctx_) {
      tls_ = std::make_unique<TlsStream>(boost::beast::tcp_stream(std::move(socket)), *tls_ctx_);
    } else {
      plain_.emplace(std::move(socket));
    }
  }
  // Not yet connected (a client's), on `executor`; tls null: plain.
  Stream(const executor_type& executor, std::shared_ptr<TlsContext> tls)
      : Stream(boost::asio::ip::tcp::socket(executor), std::move(tls)) {}
  Stream(Stream&&) = default;

  executor_type get_executor() noexcept { return tcp_layer().get_executor(); }
  boost::beast::tcp_stream& tcp_layer() noexcept { return tls_ ? tls_->next_layer() : *plain_; }
  boost::asio::ip::tcp::socket& socket() noexcept { return tcp_layer().socket(); }
  bool tls() const noexcept { return tls_ != nullptr; }
  TlsStream& tls_stream() noexcept { return *tls_; }
  template <class Duration>
  void expires_after(Duration d) {
    tcp_layer().expires_after(d);
  }
  void expires_never() { tcp_layer().expires_never(); }
  template <class TimePoint>
  void expires_at(TimePoint t) {
    tcp_layer().expires_at(t);
  }
  void close() { tcp_layer().close(); }

  template <class MutableBufferSequence, class ReadHandler>
  void async_read_some(const MutableBufferSequence& buffers, ReadHandler&& handler) {
    if (tls_) {
      tls_->async_read_some(buffers, std::forward<ReadHandler>(handler));
    } else {
      plain_->async_read_some(buffers, std::forward<ReadHandler>(handler));
    }
  }
  template <class ConstBufferSequence, class WriteHandler>
  void async_write_some(const ConstBufferSequence& buffers, WriteHandler&& handler) {
    if (tls_) {
      tls_->async_write_some(buffers, std::forward<WriteHandler>(handler));
    } else {
      plain_->async_write_some(buffers, std::forward<WriteHandler>(handler));
    }
  }

  // A client's TLS handshake with `host` (its certificate must name it;
  // SNI). Plain: completes at once. handler(error_code).
  template <class Handler>
  void async_client_handshake(const std::string& host, Handler&& handler) {
    if (!tls_) {
      boost::asio::post(get_executor(), [h = std::forward<Handler>(handler)]() mutable {
        std::move(h)(boost::system::error_code{});
      });
      return;
    }
    ExpectPeer(tls_->native_handle(), host);
    tls_->async_handshake(boost::asio::ssl::stream_base::client, std::forward<Handler>(handler));
  }

 private:
  std::shared_ptr<TlsContext> tls_ctx_;
  std::optional<boost::beast::tcp_stream> plain_;
  std::unique_ptr<TlsStream> tls_;
};

// What Beast calls to close the lowest layer (a WebSocket's teardown).
inline void beast_close_socket(Stream& s) { s.close(); }

// A WebSocket's end of the connection: TLS's close_notify first, then TCP's.
template <class TeardownHandler>
void async_teardown(boost::beast::role_type role, Stream& s, TeardownHandler&& handler) {
  using boost::beast::websocket::async_teardown;
  if (s.tls()) {
    async_teardown(role, s.tls_stream(), std::forward<TeardownHandler>(handler));
  } else {
    async_teardown(role, s.tcp_layer(), std::forward<TeardownHandler>(handler));
  }
}
inline void teardown(boost::beast::role_type role, Stream& s, boost::system::error_code& ec) {
  using boost::beast::websocket::teardown;
  if (s.tls()) {
    teardown(role, s.tls_stream(), ec);
  } else {
    teardown(role, s.tcp_layer().socket(), ec);
  }
}

// A server's context from a PEM certificate (chain) and key: TLS 1.2 and
// 1.3, forward-secret AEAD suites, no renegotiation, no compression, no
// session tickets. An error names the file and OpenSSL's reason.
Result<std::shared_ptr<TlsContext>> MakeServerTlsContext(const std::string& cert_file,
                                                         const std::string& key_file);

// A client's context: TLS 1.2 and 1.3, the peer's certificate checked
// against ca_file ("": the system's CAs). An error names the file.
Result<std::shared_ptr<TlsContext>> MakeClientTlsContext(const std::string& ca_file);

}  // namespace mb::wire
