#include "bus/nats.h"

#include <fmt/format.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <optional>

#include "common/base64.h"
#include "common/ed25519.h"
#include "common/file.h"

namespace mb::bus {

NatsConnection::~NatsConnection() {
  if (js != nullptr) jsCtx_Destroy(js);
  if (conn != nullptr) {
    natsConnection_Close(conn);
    natsConnection_Destroy(conn);
  }
}

std::string NatsError(std::string_view what, natsStatus s, int code) {
  std::string text = fmt::format("{}: {}", what, natsStatus_GetText(s));
  const char* detail = nats_GetLastError(nullptr);
  if (detail != nullptr && *detail != '\0' && text.find(detail) == std::string::npos) {
    text += fmt::format(" ({})", detail);
  }
  if (code != 0) text += fmt::format(" [JetStream error {}]", code);
  return text;
}

bool ParseU64(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

Published PublishMessage(jsCtx* js, const std::string& subject, std::span<const std::byte> data,
                         const jsPubOptions& options, const char* header_key,
                         const char* header_value) {
  Published out;
  natsMsg* m = nullptr;
  out.status =
      natsMsg_Create(&m, subject.c_str(), nullptr, reinterpret_cast<const char*>(data.data()),
                     static_cast<int>(data.size()));
  if (out.status == NATS_OK && header_key != nullptr) {
    out.status = natsMsgHeader_Set(m, header_key, header_value);
  }
  if (out.status != NATS_OK) {
    if (m != nullptr) natsMsg_Destroy(m);
    return out;
  }
  jsPubOptions po = options;
  jsPubAck* ack = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  out.status = js_PublishMsg(&ack, js, m, &po, &code);
  natsMsg_Destroy(m);
  out.code = static_cast<int>(code);
  if (ack != nullptr) {
    out.stored = ack->Sequence;
    out.duplicate = ack->Duplicate;
    jsPubAck_Destroy(ack);
  }
  return out;
}

namespace {

// A secret file's first line (a password or a token), without its newline.
Result<std::string> ReadSecretLine(const std::string& file, std::string_view key) {
  auto bytes = ReadFile(file);
  if (!bytes.ok()) {
    return InvalidArgument(fmt::format("[bus] {}: {}", key, bytes.status().message()));
  }
  std::string text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  text = text.substr(0, text.find('\n'));
  if (!text.empty() && text.back() == '\r') text.pop_back();
  if (text.empty()) return InvalidArgument(fmt::format("[bus] {}: {} is empty", key, file));
  return text;
}

bool Readable(const std::string& file) {
  std::error_code ec;
  return std::filesystem::is_regular_file(file, ec) && ::access(file.c_str(), R_OK) == 0;
}

// RFC 4648 base32 without padding, as nkeys use it.
constexpr std::string_view kBase32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

std::optional<std::string> Base32Decode(std::string_view text) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : text) {
    const std::size_t v = kBase32.find(c);
    if (v == std::string_view::npos) return std::nullopt;
    acc = (acc << 5) | static_cast<uint32_t>(v);
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

std::string Base32Encode(std::string_view bytes) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : bytes) {
    acc = (acc << 8) | static_cast<unsigned char>(c);
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out.push_back(kBase32[(acc >> bits) & 31]);
    }
  }
  if (bits > 0) out.push_back(kBase32[(acc << (5 - bits)) & 31]);
  return out;
}

// CRC-16/XMODEM, the nkey checksum.
uint16_t Crc16(std::string_view bytes) {
  uint16_t crc = 0;
  for (const char c : bytes) {
    crc ^= static_cast<uint16_t>(static_cast<unsigned char>(c) << 8);
    for (int i = 0; i < 8; ++i) {
      crc = (crc & 0x8000) != 0 ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<uint16_t>(crc << 1);
    }
  }
  return crc;
}

constexpr unsigned char kPrefixSeed = 18 << 3;  // 'S'
constexpr unsigned char kPrefixUser = 20 << 3;  // 'U'

// Sets TLS and the credential on `opts`; an error names the [bus] key.
Status ApplySecurity(natsOptions* opts, const std::vector<std::string>& servers,
                     const NatsSecurity& sec) {
  MB_RETURN_IF_ERROR(CheckNatsSecurity(sec));
  bool tls = sec.tls();
  for (const std::string& s : servers) tls = tls || s.starts_with("tls://");
  auto fail = [](std::string_view key, natsStatus s) {
    return InvalidArgument(NatsError(fmt::format("[bus] {}", key), s, 0));
  };
  if (tls) {
    if (natsStatus s = natsOptions_SetSecure(opts, true); s != NATS_OK) {
      return fail("tls (this libnats has no TLS)", s);
    }
  }
  if (!sec.tls_ca_file.empty()) {
    if (natsStatus s = natsOptions_LoadCATrustedCertificates(opts, sec.tls_ca_file.c_str());
        s != NATS_OK) {
      return fail(fmt::format("tls_ca_file {}", sec.tls_ca_file), s);
    }
  }
  if (!sec.tls_cert_file.empty()) {
    if (natsStatus s = natsOptions_LoadCertificatesChain(opts, sec.tls_cert_file.c_str(),
                                                         sec.tls_key_file.c_str());
        s != NATS_OK) {
      return fail(
          fmt::format("tls_cert_file {} / tls_key_file {}", sec.tls_cert_file, sec.tls_key_file),
          s);
    }
  }
  if (!sec.creds_file.empty()) {
    if (natsStatus s =
            natsOptions_SetUserCredentialsFromFiles(opts, sec.creds_file.c_str(), nullptr);
        s != NATS_OK) {
      return fail(fmt::format("creds_file {}", sec.creds_file), s);
    }
  }
  if (!sec.nkey_seed_file.empty()) {
    auto seed = ReadSecretLine(sec.nkey_seed_file, "nkey_seed_file");
    if (!seed.ok()) return seed.status();
    auto pub = NkeyPublicFromSeed(*seed);
    if (!pub.ok()) {
      return InvalidArgument(
          fmt::format("[bus] nkey_seed_file {}: {}", sec.nkey_seed_file, pub.status().message()));
    }
    if (natsStatus s = natsOptions_SetNKeyFromSeed(opts, pub->c_str(), sec.nkey_seed_file.c_str());
        s != NATS_OK) {
      return fail(fmt::format("nkey_seed_file {}", sec.nkey_seed_file), s);
    }
  }
  if (!sec.user.empty()) {
    auto password = ReadSecretLine(sec.password_file, "password_file");
    if (!password.ok()) return password.status();
    if (natsStatus s = natsOptions_SetUserInfo(opts, sec.user.c_str(), password->c_str());
        s != NATS_OK) {
      return fail("user", s);
    }
  }
  if (!sec.token_file.empty()) {
    auto token = ReadSecretLine(sec.token_file, "token_file");
    if (!token.ok()) return token.status();
    if (natsStatus s = natsOptions_SetToken(opts, token->c_str()); s != NATS_OK) {
      return fail("token_file", s);
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckNatsSecurity(const NatsSecurity& sec) {
  const std::pair<std::string_view, const std::string*> files[] = {
      {"tls_ca_file", &sec.tls_ca_file},       {"tls_cert_file", &sec.tls_cert_file},
      {"tls_key_file", &sec.tls_key_file},     {"creds_file", &sec.creds_file},
      {"nkey_seed_file", &sec.nkey_seed_file}, {"password_file", &sec.password_file},
      {"token_file", &sec.token_file}};
  for (const auto& [key, file] : files) {
    if (!file->empty() && !Readable(*file)) {
      return InvalidArgument(fmt::format("[bus] {}: {} is not a readable file", key, *file));
    }
  }
  if (sec.tls_cert_file.empty() != sec.tls_key_file.empty()) {
    return InvalidArgument(
        "[bus] tls_cert_file and tls_key_file go together (a client certificate and its key)");
  }
  if (sec.user.empty() != sec.password_file.empty()) {
    return InvalidArgument("[bus] user and password_file go together");
  }
  const int credentials =
      static_cast<int>(!sec.creds_file.empty()) + static_cast<int>(!sec.nkey_seed_file.empty()) +
      static_cast<int>(!sec.user.empty()) + static_cast<int>(!sec.token_file.empty());
  if (credentials > 1) {
    return InvalidArgument(
        "[bus] takes one credential: creds_file, nkey_seed_file, user + password_file or "
        "token_file");
  }
  return Status::Ok();
}

Result<std::string> NkeyPublicFromSeed(std::string_view seed) {
  const std::optional<std::string> raw = Base32Decode(seed);
  if (!raw || raw->size() != 2 + kEd25519KeyBytes + 2) {
    return InvalidArgument("not an nkey seed (\"SU...\", 58 characters of base32)");
  }
  const std::string_view body(raw->data(), raw->size() - 2);
  const uint16_t crc =
      static_cast<uint16_t>(static_cast<unsigned char>((*raw)[raw->size() - 2]) |
                            (static_cast<unsigned char>((*raw)[raw->size() - 1]) << 8));
  if (Crc16(body) != crc) return InvalidArgument("the nkey seed's checksum does not match");
  const auto b0 = static_cast<unsigned char>((*raw)[0]);
  const auto b1 = static_cast<unsigned char>((*raw)[1]);
  const unsigned char kind = static_cast<unsigned char>(((b0 & 7) << 5) | ((b1 & 0xf8) >> 3));
  if ((b0 & 0xf8) != kPrefixSeed || kind != kPrefixUser) {
    return InvalidArgument("not a user nkey seed (it must start with \"SU\")");
  }
  // The seed's 32 bytes are an Ed25519 private key; its public half is the nkey.
  std::string der = HexDecode("302e020100300506032b657004220420").value_or("") +
                    std::string(raw->substr(2, kEd25519KeyBytes));
  auto key = Ed25519Key::FromPem("-----BEGIN PRIVATE KEY-----\n" + Base64Encode(der) +
                                 "\n-----END PRIVATE KEY-----\n");
  if (!key.ok()) return key.status();
  std::string pub;
  pub.push_back(static_cast<char>(kPrefixUser));
  pub += key->public_key();
  const uint16_t pcrc = Crc16(pub);
  pub.push_back(static_cast<char>(pcrc & 0xff));
  pub.push_back(static_cast<char>(pcrc >> 8));
  return Base32Encode(pub);
}

Status CheckNatsCredentials(const std::vector<std::string>& servers, const NatsSecurity& security,
                            std::chrono::milliseconds timeout) {
  auto c = ConnectNats(servers, "matchbook credential check", timeout, timeout, security);
  if (!c.ok() && c.status().code() == StatusCode::kInvalidArgument) return c.status();
  return Status::Ok();
}

Result<std::unique_ptr<NatsConnection>> ConnectNats(const std::vector<std::string>& servers,
                                                    const std::string& name,
                                                    std::chrono::milliseconds timeout,
                                                    std::chrono::milliseconds retry,
                                                    const NatsSecurity& security) {
  natsOptions* opts = nullptr;
  if (natsOptions_Create(&opts) != NATS_OK) return Unavailable("cannot create NATS options");
  if (Status st = ApplySecurity(opts, servers, security); !st.ok()) {
    natsOptions_Destroy(opts);
    return st;
  }
  std::vector<const char*> urls;
  for (const std::string& s : servers) urls.push_back(s.c_str());
  natsStatus s = natsOptions_SetServers(opts, urls.data(), static_cast<int>(urls.size()));
  if (s == NATS_OK) s = natsOptions_SetTimeout(opts, timeout.count());
  if (s == NATS_OK) s = natsOptions_SetName(opts, name.c_str());
  if (s == NATS_OK) s = natsOptions_SetAllowReconnect(opts, true);
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(opts, retry.count());
  auto nats = std::make_unique<NatsConnection>();
  if (s == NATS_OK) s = natsConnection_Connect(&nats->conn, opts);
  natsOptions_Destroy(opts);
  if (s != NATS_OK) {
    std::string list;
    for (const std::string& u : servers) list += (list.empty() ? "" : ",") + u;
    std::string hint;
    if (s == NATS_CONNECTION_AUTH_FAILED || s == NATS_NOT_PERMITTED) {
      hint =
          " — the server refused the credential: check [bus] creds_file, nkey_seed_file, "
          "user + password_file or token_file";
    } else if (s == NATS_SSL_ERROR || s == NATS_SECURE_CONNECTION_REQUIRED ||
               s == NATS_SECURE_CONNECTION_WANTED) {
      hint =
          " — TLS failed: check the tls:// URL and [bus] tls_ca_file (the server's CA), "
          "tls_cert_file and tls_key_file";
    }
    const Status err =
        Unavailable(NatsError(fmt::format("cannot connect to NATS at {}", list), s, 0) + hint);
    if (!hint.empty()) return InvalidArgument(err.message());
    return err;
  }
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = timeout.count();
  if (s = natsConnection_JetStream(&nats->js, nats->conn, &jo); s != NATS_OK) {
    return Unavailable(NatsError("JetStream context", s, 0));
  }
  return nats;
}

Result<StreamState> EnsureStream(jsCtx* js, const StreamSpec& spec) {
  jsStreamInfo* si = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&si, js, spec.name.c_str(), nullptr, &code);
  StreamState state;
  if (s == NATS_NOT_FOUND || code == JSStreamNotFoundErr) {
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    const char* subjects[] = {spec.subject.c_str()};
    cfg.Name = spec.name.c_str();
    cfg.Description = spec.description.c_str();
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    cfg.Replicas = spec.replicas;
    cfg.MaxBytes = spec.max_bytes;
    cfg.MaxAge = spec.max_age_ns;
    cfg.Duplicates = spec.duplicates_ns;
    cfg.Discard = js_DiscardOld;
    code = static_cast<jsErrCode>(0);
    s = js_AddStream(&si, js, &cfg, nullptr, &code);
    if (s != NATS_OK) {
      return Unavailable(
          NatsError(fmt::format("cannot create stream {}", spec.name), s, static_cast<int>(code)));
    }
    state.created = true;
  } else if (s != NATS_OK) {
    return Unavailable(NatsError(fmt::format("stream {}", spec.name), s, static_cast<int>(code)));
  }
  const std::string theirs =
      si->Config != nullptr && si->Config->Description != nullptr ? si->Config->Description : "";
  const bool only_subject = si->Config != nullptr && si->Config->SubjectsLen == 1 &&
                            spec.subject == si->Config->Subjects[0];
  state.last_seq = si->State.LastSeq;
  state.messages = si->State.Msgs;
  // An existing stream of this venue takes the configured limits and
  // replica count (a change of [bus] between runs).
  int replicas = spec.replicas;
  if (!state.created && spec.keep_more_replicas && si->Config != nullptr &&
      si->Config->Replicas > replicas) {
    replicas = static_cast<int>(si->Config->Replicas);
    state.change = fmt::format(
        "stream {} keeps its {} replicas ([bus] replicas is not set; set it to change them)",
        spec.name, replicas);
  }
  if (!state.created && theirs == spec.description && only_subject &&
      (si->Config->Replicas != replicas || si->Config->MaxBytes != spec.max_bytes ||
       si->Config->MaxAge != spec.max_age_ns)) {
    jsStreamConfig cfg = *si->Config;  // its own strings stay valid until si is destroyed
    const std::string was = fmt::format("{} replica(s), {} MiB, {} s", cfg.Replicas,
                                        cfg.MaxBytes >> 20, cfg.MaxAge / 1'000'000'000);
    cfg.Replicas = replicas;
    cfg.MaxBytes = spec.max_bytes;
    cfg.MaxAge = spec.max_age_ns;
    const std::string now = fmt::format("{} replica(s), {} MiB, {} s", cfg.Replicas,
                                        cfg.MaxBytes >> 20, cfg.MaxAge / 1'000'000'000);
    jsStreamInfo* updated = nullptr;
    code = static_cast<jsErrCode>(0);
    s = js_UpdateStream(&updated, js, &cfg, nullptr, &code);
    if (updated != nullptr) jsStreamInfo_Destroy(updated);
    state.change = s == NATS_OK
                       ? fmt::format("stream {}: {} → {}", spec.name, was, now)
                       : NatsError(fmt::format("stream {} kept {} (asked {})", spec.name, was, now),
                                   s, static_cast<int>(code));
  }
  jsStreamInfo_Destroy(si);
  if (theirs != spec.description) {
    return InvalidArgument(fmt::format(
        "stream {} is not this venue's: it says \"{}\", this server is \"{}\" (another venue or "
        "another configuration publishes there; name another stream in [bus])",
        spec.name, theirs, spec.description));
  }
  if (!only_subject) {
    return InvalidArgument(fmt::format(
        "stream {} must take subject {} and no other (publishing conditions on its last message)",
        spec.name, spec.subject));
  }
  return state;
}

}  // namespace mb::bus
