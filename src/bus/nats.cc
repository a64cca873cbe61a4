#include "bus/nats.h"

#include <fmt/format.h>

#include <charconv>

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

Result<std::unique_ptr<NatsConnection>> ConnectNats(const std::vector<std::string>& servers,
                                                    const std::string& name,
                                                    std::chrono::milliseconds timeout,
                                                    std::chrono::milliseconds retry) {
  natsOptions* opts = nullptr;
  if (natsOptions_Create(&opts) != NATS_OK) return Unavailable("cannot create NATS options");
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
    return Unavailable(NatsError(fmt::format("cannot connect to NATS at {}", list), s, 0));
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
