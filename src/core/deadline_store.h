// A c10d store whose every call returns or fails within its timeout (--dist-timeout). c10d's
// TCPStore waits without limit for the answer to check/get/add/...: when the process serving
// the store is stopped (SIGSTOP) the kernel keeps its socket open, so nothing is refused and
// nothing answers (issue 34 §1). docs/distributed.md.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace normlab::core {

// A store call, or a store's connection, with no answer within its limit.
struct StoreTimeout : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// f() run on a thread of its own, or StoreTimeout(`what`) when it has not returned within
// `limit`. A call that never returns keeps that thread, detached, and whatever f captured: f
// must capture by value.
template <typename F>
auto call_within(std::chrono::milliseconds limit, const std::string& what, F f) -> decltype(f()) {
  using T = decltype(f());
  auto promise = std::make_shared<std::promise<T>>();
  auto result = promise->get_future();
  std::thread([promise, f = std::move(f)]() mutable {
    try {
      if constexpr (std::is_void_v<T>) {
        f();
        promise->set_value();
      } else {
        promise->set_value(f());
      }
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
  }).detach();
  if (result.wait_for(limit) != std::future_status::ready) throw StoreTimeout(what);
  return result.get();
}

// Forwards every call to `inner` within getTimeout() (setTimeout sets both stores' timeouts)
// plus a second, so that the inner store's own time-outs (a key that never came) come first.
// After one call went unanswered every later call fails at once: the inner store is still
// busy with that one.
class DeadlineStore : public c10d::Store {
 public:
  // Messages name the store and its server: "the rendezvous store at `where` did not answer
  // (check) within 3 s (is `server` stopped?)", `server` "rank 0" or "torchrun's agent".
  DeadlineStore(c10::intrusive_ptr<c10d::Store> inner, std::string where, std::string server,
                std::chrono::milliseconds timeout);

  c10::intrusive_ptr<c10d::Store> clone() override;
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& current,
                                  const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  void setTimeout(const std::chrono::milliseconds& timeout) override;
  void append(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<std::vector<uint8_t>> multiGet(const std::vector<std::string>& keys) override;
  void multiSet(const std::vector<std::string>& keys, const std::vector<std::vector<uint8_t>>& values) override;
  bool hasExtendedApi() const override;

 private:
  // f(inner) within `limit` plus a second; the first call without an answer marks the store
  // lost. f captures by value (call_within).
  template <typename F>
  auto call(const char* name, std::chrono::milliseconds limit, F f) -> decltype(f(std::declval<c10d::Store&>()));

  const c10::intrusive_ptr<c10d::Store> inner_;
  const std::string where_, server_;
  std::mutex mutex_;
  std::string lost_;  // the first unanswered call's message, once there is one
};

}  // namespace normlab::core
