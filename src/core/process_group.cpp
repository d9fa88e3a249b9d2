#include "core/process_group.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "core/deadline_store.h"
#include "core/gloo_backend.h"
#include "core/nccl_backend.h"

namespace normlab::core {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// The first line of an error, without c10's backtrace.
std::string first_line(const std::exception& e) {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  std::string text = c10 != nullptr ? c10->what_without_backtrace() : e.what();
  return text.substr(0, text.find('\n'));
}

std::string seconds(milliseconds t) {
  std::ostringstream s;
  s << static_cast<double>(t.count()) / 1000.0 << " s";
  return s.str();
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

std::string key(const std::string& what, int rank) { return "normlab/" + what + "/" + std::to_string(rank); }

// The ranks among 0..size-1 whose key `what/r` is still missing after waiting up to `limit`.
std::vector<int> wait_for_ranks(c10d::Store& store, const std::string& what, int size, milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  std::vector<int> missing(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) missing[static_cast<size_t>(r)] = r;
  while (true) {
    missing.erase(std::remove_if(missing.begin(), missing.end(),
                                 [&](int r) { return store.check({key(what, r)}); }),
                  missing.end());
    if (missing.empty() || Clock::now() >= deadline) return missing;
    std::this_thread::sleep_for(milliseconds(50));
  }
}

// Each rank claims its number once and states its WORLD_SIZE; each compares its own with rank
// 0's and says so (checked/r) before it fails, so that rank 0, which serves the store, stays
// until every rank has read what it needs and then checks them all.
void check_in(c10d::Store& store, const LaunchEnv& env, milliseconds timeout, const std::string& where) {
  const std::string me = "rank " + std::to_string(env.rank);
  if (store.add(key("claim", env.rank), 1) > 1)
    throw std::runtime_error(me + " was started twice (two processes with RANK=" + std::to_string(env.rank) + ")");
  store.set(key("world", env.rank), std::to_string(env.world_size));
  const std::string joined = " within --dist-timeout " + seconds(timeout) + " (rendezvous at " + where + ")";
  if (!wait_for_ranks(store, "world", 1, timeout).empty()) throw std::runtime_error(me + ": rank 0 did not join" + joined);
  const auto world_of = [&](int r) {
    const auto v = store.get(key("world", r));
    return std::string(v.begin(), v.end());
  };
  const std::string rank0 = world_of(0);
  store.set(key("checked", env.rank), std::string("1"));
  if (rank0 != std::to_string(env.world_size))
    throw std::runtime_error(me + " has WORLD_SIZE=" + std::to_string(env.world_size) + " but rank 0 has WORLD_SIZE=" +
                             rank0);
  const auto missing = wait_for_ranks(store, "checked", env.world_size, timeout);
  if (!missing.empty())
    throw std::runtime_error("rank" + std::string(missing.size() > 1 ? "s " : " ") + rank_list(missing) + " of " +
                             std::to_string(env.world_size) + " did not join" + joined);
  for (int r = 1; r < env.world_size; ++r)
    if (world_of(r) != rank0)
      throw std::runtime_error("rank " + std::to_string(r) + " has WORLD_SIZE=" + world_of(r) +
                               " but rank 0 has WORLD_SIZE=" + rank0);
}

}  // namespace

// nccl is refused here by a build without it, with or without a launcher (issue 34).
DistBackend parse_dist_backend(const std::string& name) {
  if (name == "auto") return DistBackend::kAuto;
  if (name == "gloo") return DistBackend::kGloo;
  if (name == "nccl") {
    if (!have_nccl())
      throw std::invalid_argument("--dist-backend nccl: this normlab was built without NCCL (a CPU LibTorch, or no "
                                  "nccl.h beside a CUDA one; docs/gpu.md); use --dist-backend gloo");
    return DistBackend::kNccl;
  }
  throw std::invalid_argument("--dist-backend: unknown value '" + name + "', expected auto|gloo|nccl");
}

namespace {

// The backend `requested` on `device`: auto is NCCL on a GPU where this build has it.
DistBackend resolve(DistBackend requested, const c10::Device& device) {
  if (requested == DistBackend::kNccl && !device.is_cuda())
    throw std::invalid_argument("--dist-backend nccl needs a CUDA device (--device cuda), got " + device.str());
  if (requested != DistBackend::kAuto) return requested;
  return device.is_cuda() && have_nccl() ? DistBackend::kNccl : DistBackend::kGloo;
}

}  // namespace

struct ProcessGroup::Impl {
  int rank = 0, size = 1;
  milliseconds timeout{0};
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
  // NCCL's GPU, where every tensor of a collective must be; none for Gloo, which takes CPU and
  // CUDA tensors where they are.
  std::optional<c10::Device> device;

  // `t` where the backend takes it (itself when it is there already).
  at::Tensor placed(const at::Tensor& t) const { return !device || t.device() == *device ? t : t.to(*device); }
  // The result of a collective on `placed` back into `t`.
  static void settle(at::Tensor& t, const at::Tensor& placed) {
    if (!placed.is_same(t)) t.copy_(placed);
  }

  // Runs `step` of collective `op` (its start, or its wait). When it fails, every rank still
  // alive says so through the store, and those that do not within a few seconds are named as
  // lost; when the store itself is gone, so is rank 0, whose process serves it (without
  // torchrun's agent store).
  void guard(const char* op, const std::function<void()>& step) {
    try {
      step();
    } catch (const std::exception& e) {
      const std::string cause = std::string(op) + " failed: " + first_line(e);
      std::vector<int> lost;
      try {
        c10d::StoreTimeoutGuard quick(*store, std::min(timeout, milliseconds(5000)));  // each store call's limit too
        store->set(key("failed", rank), std::string("1"));
        lost = wait_for_ranks(*store, "failed", size, std::min(timeout, milliseconds(5000)));
      } catch (const std::exception&) {
        throw std::runtime_error("rank " + std::to_string(rank) + " of " + std::to_string(size) +
                                 ": lost rank 0 (the rendezvous store it served no longer answers); " + cause);
      }
      if (lost.empty())
        throw std::runtime_error("rank " + std::to_string(rank) + " of " + std::to_string(size) + ": " + cause);
      throw std::runtime_error("rank " + std::to_string(rank) + " of " + std::to_string(size) + ": lost rank" +
                               (lost.size() > 1 ? "s " : " ") + rank_list(lost) + " (no answer after " + cause + ")");
    }
  }

  // Runs one collective to completion.
  void run(const char* op, const std::function<c10::intrusive_ptr<c10d::Work>()>& start) {
    guard(op, [&] { start()->wait(timeout); });
  }
};

ProcessGroup::ProcessGroup() : impl_(std::make_shared<Impl>()) {}

ProcessGroup ProcessGroup::from_environment(const DistOptions& options, const c10::Device& device) {
  const auto env = read_launch_env();
  return env ? connect(*env, options, device) : ProcessGroup();
}

ProcessGroup ProcessGroup::connect(const LaunchEnv& env, const DistOptions& options, const c10::Device& device) {
  ProcessGroup group;
  const DistBackend backend = resolve(options.backend, device);
  if (env.world_size == 1) return group;
  auto& g = *group.impl_;
  g.rank = env.rank;
  g.size = env.world_size;
  g.timeout = options.timeout;
  const std::string where = env.master_addr + ":" + std::to_string(env.master_port);
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(env.master_port);
  so.timeout = options.timeout;
  so.waitWorkers = false;  // normlab's own check-in below names the missing ranks
  so.numWorkers = env.world_size;
  // torch.distributed's env:// rendezvous: under torchrun's agent store every rank is a client
  // and the keys of restart attempt N live under /worker/attempt_N; else rank 0 serves it.
  so.isServer = !env.agent_store && env.rank == 0;
  so.multiTenant = !env.agent_store;
  // Every call to the store, its connection included, fails after the timeout (DeadlineStore):
  // a stopped server keeps its socket open and never answers.
  const std::string server = env.agent_store ? "torchrun's agent" : "rank 0";
  try {
    const std::string silent = "the rendezvous store at " + where + " did not answer the connection within --dist-timeout " +
                               seconds(options.timeout) + " (is " + server + " stopped?)";
    auto tcp = call_within(options.timeout + milliseconds(1000), silent, [host = env.master_addr, so] {
      return c10::make_intrusive<c10d::TCPStore>(host, so);
    });
    auto inner = env.agent_store ? c10::intrusive_ptr<c10d::Store>(c10::make_intrusive<c10d::PrefixStore>(
                                       "/worker/attempt_" + std::to_string(env.restart_count), tcp))
                                 : c10::intrusive_ptr<c10d::Store>(tcp);
    g.store = c10::make_intrusive<DeadlineStore>(inner, where, server, options.timeout);
  } catch (const StoreTimeout& e) {
    throw std::runtime_error("rank " + std::to_string(env.rank) + ": " + e.what());
  } catch (const std::exception& e) {
    if (so.isServer)
      throw std::runtime_error("rank 0 cannot serve the rendezvous store on MASTER_PORT=" +
                               std::to_string(env.master_port) + " (in use?): " + first_line(e));
    throw std::runtime_error("rank " + std::to_string(env.rank) + " cannot reach the rendezvous store at " + where +
                             " within --dist-timeout " + seconds(options.timeout) + ": " + first_line(e));
  }
  try {
    check_in(*g.store, env, options.timeout, where);
  } catch (const StoreTimeout& e) {
    throw std::runtime_error("rank " + std::to_string(env.rank) + " during the check-in: " + e.what());
  } catch (const c10::Error& e) {  // the store went away: rank 0 stopped, with its own error
    throw std::runtime_error("rank " + std::to_string(env.rank) + ": the rendezvous store at " + where +
                             " closed during the check-in (rank 0 stopped?): " + first_line(e));
  }
  if (backend == DistBackend::kNccl) {
    g.device = device;
    g.backend = make_nccl_backend(c10::make_intrusive<c10d::PrefixStore>("normlab/nccl", g.store), env.rank,
                                  env.world_size, options.timeout);
  } else {
    g.backend = make_gloo_backend(c10::make_intrusive<c10d::PrefixStore>("normlab/gloo", g.store), env.rank,
                                  env.world_size, options.timeout, env.master_addr);
  }
  return group;
}

int ProcessGroup::rank() const { return impl_->rank; }
int ProcessGroup::size() const { return impl_->size; }

// (c10d's vector arguments hold one tensor per device of this rank, not a list to reduce.)
void ProcessGroup::all_reduce_sum(at::Tensor& tensor) {
  if (impl_->size == 1) return;
  std::vector<at::Tensor> one = {impl_->placed(tensor)};
  impl_->run("all_reduce", [&] { return impl_->backend->allreduce(one); });
  Impl::settle(tensor, one[0]);
}

void ProcessGroup::Pending::wait() {
  if (!wait_) return;
  auto wait = std::move(wait_);
  wait_ = nullptr;
  wait();
}

ProcessGroup::Pending ProcessGroup::start_all_reduce_sum(at::Tensor& tensor) {
  Pending pending;
  if (impl_->size == 1) return pending;
  std::vector<at::Tensor> one = {impl_->placed(tensor)};
  c10::intrusive_ptr<c10d::Work> work;
  impl_->guard("all_reduce", [&] { work = impl_->backend->allreduce(one); });
  pending.wait_ = [impl = impl_, work, tensor, placed = one[0]]() mutable {
    impl->guard("all_reduce", [&] { work->wait(impl->timeout); });
    Impl::settle(tensor, placed);
  };
  return pending;
}

void ProcessGroup::broadcast(at::Tensor& tensor, int root) {
  if (impl_->size == 1) return;
  std::vector<at::Tensor> one = {impl_->placed(tensor)};
  c10d::BroadcastOptions o;
  o.rootRank = root;
  impl_->run("broadcast", [&] { return impl_->backend->broadcast(one, o); });
  Impl::settle(tensor, one[0]);
}

std::vector<std::string> ProcessGroup::all_gather(const std::string& bytes) {
  if (impl_->size == 1) return {bytes};
  const auto n = static_cast<size_t>(impl_->size);
  // Lengths first, then every rank's bytes padded to the longest.
  const auto on = at::TensorOptions().device(impl_->device.value_or(c10::Device(c10::kCPU)));
  std::vector<at::Tensor> length = {at::full({1}, static_cast<int64_t>(bytes.size()), on.dtype(at::kLong))};
  std::vector<std::vector<at::Tensor>> lengths(1);
  for (size_t r = 0; r < n; ++r) lengths[0].push_back(at::empty({1}, on.dtype(at::kLong)));
  impl_->run("all_gather", [&] { return impl_->backend->allgather(lengths, length); });
  int64_t longest = 1;
  for (const auto& t : lengths[0]) longest = std::max(longest, t.item<int64_t>());
  auto padded = at::zeros({longest}, at::kByte);
  std::copy(bytes.begin(), bytes.end(), padded.data_ptr<uint8_t>());
  std::vector<at::Tensor> mine = {impl_->placed(padded)};
  std::vector<std::vector<at::Tensor>> all(1);
  for (size_t r = 0; r < n; ++r) all[0].push_back(at::empty({longest}, on.dtype(at::kByte)));
  impl_->run("all_gather", [&] { return impl_->backend->allgather(all, mine); });
  std::vector<std::string> out;
  for (size_t r = 0; r < n; ++r) {
    const auto got = all[0][r].cpu();
    const auto* p = reinterpret_cast<const char*>(got.data_ptr<uint8_t>());
    out.emplace_back(p, p + lengths[0][r].item<int64_t>());
  }
  return out;
}

void ProcessGroup::barrier() {
  if (impl_->size == 1) return;
  impl_->run("barrier", [&] { return impl_->backend->barrier(); });
}

}  // namespace normlab::core
