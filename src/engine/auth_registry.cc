#include "engine/internal/auth_registry.h"

#include <string>

namespace mb::engine::internal {

RejectReason AuthRegistry::Check(const AuthChange& c, AuthChanged* out) const {
  *out =
      AuthChanged{c.kind, c.account, c.permissions, c.ed25519, c.created_ms, c.subject, c.secret};
  switch (c.kind) {
    case AuthChangeKind::kCreateAccount: {
      if (c.subject.empty()) return RejectReason::kInvalidAuthChange;
      if (names_.count(std::string(c.subject.view())) != 0) return RejectReason::kNameTaken;
      // Ids are dense from 1 (accounts are never deleted); 0 is the fee account.
      const uint64_t next = accounts_.size() + 1;
      if (next >= max_accounts_) return RejectReason::kNoAccountIdLeft;
      out->account = AccountId{static_cast<uint32_t>(next)};
      out->permissions = 0;
      out->ed25519 = false;
      out->secret = AuthText{};
      return RejectReason::kNone;
    }
    case AuthChangeKind::kCreateKey: {
      if (c.subject.empty() || c.secret.empty()) return RejectReason::kInvalidAuthChange;
      if (Raw(c.account) == 0 || Raw(c.account) > accounts_.size()) {
        return RejectReason::kUnknownAccount;
      }
      if (key_.count(std::string(c.subject.view())) != 0 ||
          (c.ed25519 && public_keys_.count(std::string(c.secret.view())) != 0)) {
        return RejectReason::kKeyTaken;
      }
      return RejectReason::kNone;
    }
    case AuthChangeKind::kRevokeKey: {
      const auto it = key_.find(std::string(c.subject.view()));
      if (it == key_.end()) return RejectReason::kUnknownApiKey;
      // The event names the key's account, for whoever reads the journal.
      const ImageApiKey& k = keys_[it->second];
      out->account = k.account;
      out->permissions = 0;
      out->ed25519 = false;
      out->secret = AuthText{};
      return RejectReason::kNone;
    }
  }
  return RejectReason::kInvalidAuthChange;
}

void AuthRegistry::Apply(const AuthChanged& e) {
  switch (e.kind) {
    case AuthChangeKind::kCreateAccount:
      accounts_.push_back(ImageAccount{e.account, e.created_ms, e.subject});
      names_.emplace(e.subject.view());
      return;
    case AuthChangeKind::kCreateKey:
      key_.emplace(std::string(e.subject.view()), keys_.size());
      keys_.push_back(ImageApiKey{e.account, e.created_ms, e.permissions, e.ed25519, false,
                                  e.subject, e.secret});
      if (e.ed25519) public_keys_.emplace(e.secret.view());
      return;
    case AuthChangeKind::kRevokeKey:
      keys_[key_.at(std::string(e.subject.view()))].revoked = true;
      return;
  }
}

void AuthRegistry::Export(EngineImage* image) const {
  image->accounts = accounts_;
  image->api_keys = keys_;
}

Status AuthRegistry::Load(const EngineImage& image) {
  accounts_.clear();
  names_.clear();
  keys_.clear();
  key_.clear();
  public_keys_.clear();
  for (std::size_t i = 0; i < image.accounts.size(); ++i) {
    const ImageAccount& a = image.accounts[i];
    if (Raw(a.id) != i + 1 || Raw(a.id) >= max_accounts_ || a.name.empty() ||
        !names_.emplace(a.name.view()).second) {
      return InvalidArgument("snapshot account " + std::to_string(Raw(a.id)) +
                             " is out of order, beyond max_accounts, unnamed or named twice");
    }
    accounts_.push_back(a);
  }
  for (const ImageApiKey& k : image.api_keys) {
    if (Raw(k.account) == 0 || Raw(k.account) > accounts_.size() || k.key.empty() ||
        k.secret.empty() || !key_.emplace(std::string(k.key.view()), keys_.size()).second ||
        (k.ed25519 && !public_keys_.emplace(k.secret.view()).second)) {
      return InvalidArgument("snapshot API key of account " + std::to_string(Raw(k.account)) +
                             " belongs to no account, is empty or is there twice");
    }
    keys_.push_back(k);
  }
  return Status::Ok();
}

}  // namespace mb::engine::internal
