// The one place that includes c10d's ProcessGroupGloo.hpp (and so Gloo's headers, Debian's
// libgloo-dev: the wheel ships c10d's Gloo code but not Gloo's headers; docs/distributed.md says
// why these match the library LibTorch links).
#pragma once

#include <chrono>
#include <string>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace normlab::core {

// Whether this build has Gloo (NORMLAB_WITH_GLOO).
bool have_gloo();

// A Gloo group over `store`, its sockets bound to the interfaces of GLOO_SOCKET_IFNAME when
// set, to the loopback when the master is on it, else to this host's name (PyTorch's default).
c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int size, std::chrono::milliseconds timeout,
                                                    const std::string& master_addr);

}  // namespace normlab::core
