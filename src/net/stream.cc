#include "net/stream.h"

#include <fmt/format.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>

namespace mb::wire {

namespace {

namespace ssl = boost::asio::ssl;

// TLS 1.2's suites: forward secrecy and AEAD only (TLS 1.3's are all such).
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

Status Harden(SSL_CTX* native) {
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                  SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_TICKET);
  if (SSL_CTX_set_cipher_list(native, kTls12Ciphers) != 1) {
    return Status(StatusCode::kInternal, "TLS: the cipher list is refused by OpenSSL");
  }
  return Status::Ok();
}

}  // namespace

void ExpectPeer(SSL* ssl, const std::string& host) {
  boost::system::error_code not_an_address;
  (void)boost::asio::ip::make_address(host, not_an_address);
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  if (not_an_address) {
    SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
             const_cast<char*>(host.c_str()));
    X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size());
  } else {
    X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
  }
}

Result<std::shared_ptr<TlsContext>> MakeServerTlsContext(const std::string& cert_file,
                                                         const std::string& key_file) {
  auto ctx = std::make_shared<TlsContext>(ssl::context::tls_server);
  MB_RETURN_IF_ERROR(Harden(ctx->native_handle()));
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(cert_file, ec);
  if (ec) return InvalidArgument(fmt::format("TLS certificate {}: {}", cert_file, ec.message()));
  ctx->use_private_key_file(key_file, ssl::context::pem, ec);
  if (ec) return InvalidArgument(fmt::format("TLS key {}: {}", key_file, ec.message()));
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    return InvalidArgument(
        fmt::format("TLS key {} is not the key of certificate {}", key_file, cert_file));
  }
  return ctx;
}

Result<std::shared_ptr<TlsContext>> MakeClientTlsContext(const std::string& ca_file) {
  auto ctx = std::make_shared<TlsContext>(ssl::context::tls_client);
  MB_RETURN_IF_ERROR(Harden(ctx->native_handle()));
  boost::system::error_code ec;
  if (ca_file.empty()) {
    ctx->set_default_verify_paths(ec);
    if (ec) return InvalidArgument("TLS: the system's CAs cannot be loaded: " + ec.message());
  } else {
    ctx->load_verify_file(ca_file, ec);
    if (ec) return InvalidArgument(fmt::format("TLS CA file {}: {}", ca_file, ec.message()));
  }
  ctx->set_verify_mode(ssl::verify_peer, ec);
  if (ec) return InvalidArgument("TLS: " + ec.message());
  return ctx;
}

}  // namespace mb::wire
