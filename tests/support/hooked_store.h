// tests/support/hooked_store.h — a store that runs a hook before every begin (so between a
// commit and the retry that follows it), for placing another call, or a change of a fault
// injector's rates, at one exact moment.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "kvq/kv.h"

namespace kvq::testing {

class HookedStore : public kv::Store {
 public:
  HookedStore(std::shared_ptr<kv::Store> inner, std::function<void()> hook)
      : inner_(std::move(inner)), hook_(std::move(hook)) {}
  Result<std::unique_ptr<kv::Transaction>> begin() override {
    hook_();
    return inner_->begin();
  }
  std::string describe() const override { return "hooked(" + inner_->describe() + ")"; }
  bool nonblocking() const override { return inner_->nonblocking(); }

 private:
  std::shared_ptr<kv::Store> inner_;
  std::function<void()> hook_;
};

}  // namespace kvq::testing
