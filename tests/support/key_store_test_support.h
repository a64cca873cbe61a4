// Tests of what reads the key store: changes applied to a KeyStore as the
// engine records them (AuthChanged events: the next account id, the command's
// key and secret), without an exchange.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/event.h"
#include "gateway/auth.h"

namespace mb::gateway::testing {

inline Status ApplyChange(KeyStore& store, const engine::AuthChange& c) {
  engine::AuthChanged e{c.kind,       c.account, c.permissions, c.ed25519,
                        c.created_ms, c.subject, c.secret};
  if (c.kind == engine::AuthChangeKind::kCreateAccount) {
    e.account = AccountId{static_cast<uint32_t>(store.Accounts().size() + 1)};
  }
  const std::vector<engine::Event> events = {engine::Event(Sequence{1}, 0, e)};
  store.Apply(events);
  return Status::Ok();
}

inline Result<AccountInfo> CreateAccount(KeyStore& store, std::string_view name, int64_t now_ms) {
  Result<engine::AuthChange> c = store.NewAccount(name, now_ms);
  if (!c.ok()) return c.status();
  MB_RETURN_IF_ERROR(ApplyChange(store, *c));
  return *store.FindAccount(AccountId{static_cast<uint32_t>(store.Accounts().size())});
}

inline Result<ApiKey> CreateKey(KeyStore& store, AccountId account, int64_t now_ms,
                                uint8_t permissions = kDefaultPermissions,
                                std::string_view ed25519_public_key = {}) {
  Result<engine::AuthChange> c = store.NewKey(account, now_ms, permissions, ed25519_public_key);
  if (!c.ok()) return c.status();
  MB_RETURN_IF_ERROR(ApplyChange(store, *c));
  return *store.FindKey(c->subject.view());
}

inline Result<ApiKey> CreateEd25519Key(KeyStore& store, AccountId account,
                                       std::string_view public_key, int64_t now_ms) {
  return CreateKey(store, account, now_ms, kDefaultPermissions, public_key);
}

inline Status RevokeKey(KeyStore& store, std::string_view key) {
  Result<engine::AuthChange> c = store.Revocation(key);
  if (!c.ok()) return c.status();
  return ApplyChange(store, *c);
}

}  // namespace mb::gateway::testing
