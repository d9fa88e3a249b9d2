#include "core/deadline_store.h"

#include <sstream>

namespace normlab::core {
namespace {

using std::chrono::milliseconds;

// A margin over each call's limit, so that the inner store's own time-out is the one seen.
constexpr milliseconds kGrace{1000};

std::string seconds(milliseconds t) {
  std::ostringstream s;
  s << static_cast<double>(t.count()) / 1000.0 << " s";
  return s.str();
}

}  // namespace

DeadlineStore::DeadlineStore(c10::intrusive_ptr<c10d::Store> inner, std::string where, std::string server,
                             milliseconds timeout)
    : Store(timeout), inner_(std::move(inner)), where_(std::move(where)), server_(std::move(server)) {
  inner_->setTimeout(timeout);
}

template <typename F>
auto DeadlineStore::call(const char* name, milliseconds limit, F f) -> decltype(f(std::declval<c10d::Store&>())) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!lost_.empty()) throw StoreTimeout(lost_);
  }
  const std::string what = "the rendezvous store at " + where_ + " did not answer (" + name + ") within " +
                           seconds(limit) + " (is " + server_ + " stopped?)";
  try {
    return call_within(limit + kGrace, what, [inner = inner_, f] { return f(*inner); });
  } catch (const StoreTimeout& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (lost_.empty()) lost_ = e.what();
    throw;
  }
}

c10::intrusive_ptr<c10d::Store> DeadlineStore::clone() {
  return c10::make_intrusive<DeadlineStore>(inner_->clone(), where_, server_, timeout_);
}

void DeadlineStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  call("set", timeout_, [key, value](c10d::Store& s) { s.set(key, value); });
}

std::vector<uint8_t> DeadlineStore::compareSet(const std::string& key, const std::vector<uint8_t>& current,
                                               const std::vector<uint8_t>& desired) {
  return call("compareSet", timeout_,
              [key, current, desired](c10d::Store& s) { return s.compareSet(key, current, desired); });
}

std::vector<uint8_t> DeadlineStore::get(const std::string& key) {
  return call("get", timeout_, [key](c10d::Store& s) { return s.get(key); });
}

int64_t DeadlineStore::add(const std::string& key, int64_t value) {
  return call("add", timeout_, [key, value](c10d::Store& s) { return s.add(key, value); });
}

bool DeadlineStore::deleteKey(const std::string& key) {
  return call("deleteKey", timeout_, [key](c10d::Store& s) { return s.deleteKey(key); });
}

bool DeadlineStore::check(const std::vector<std::string>& keys) {
  return call("check", timeout_, [keys](c10d::Store& s) { return s.check(keys); });
}

int64_t DeadlineStore::getNumKeys() {
  return call("getNumKeys", timeout_, [](c10d::Store& s) { return s.getNumKeys(); });
}

void DeadlineStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void DeadlineStore::wait(const std::vector<std::string>& keys, const milliseconds& timeout) {
  call("wait", timeout, [keys, timeout](c10d::Store& s) { s.wait(keys, timeout); });
}

void DeadlineStore::setTimeout(const milliseconds& timeout) {
  Store::setTimeout(timeout);
  inner_->setTimeout(timeout);
}

void DeadlineStore::append(const std::string& key, const std::vector<uint8_t>& value) {
  call("append", timeout_, [key, value](c10d::Store& s) { s.append(key, value); });
}

std::vector<std::vector<uint8_t>> DeadlineStore::multiGet(const std::vector<std::string>& keys) {
  return call("multiGet", timeout_, [keys](c10d::Store& s) { return s.multiGet(keys); });
}

void DeadlineStore::multiSet(const std::vector<std::string>& keys, const std::vector<std::vector<uint8_t>>& values) {
  call("multiSet", timeout_, [keys, values](c10d::Store& s) { s.multiSet(keys, values); });
}

bool DeadlineStore::hasExtendedApi() const { return inner_->hasExtendedApi(); }

}  // namespace normlab::core
