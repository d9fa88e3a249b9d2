#include "core/gloo_backend.h"

#include <cstdlib>
#include <sstream>
#include <stdexcept>

#ifdef NORMLAB_WITH_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif

namespace normlab::core {

#ifdef NORMLAB_WITH_GLOO
bool have_gloo() { return true; }

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int size, std::chrono::milliseconds timeout,
                                                    const std::string& master_addr) {
  auto options = c10::make_intrusive<c10d::ProcessGroupGloo::Options>(timeout);
  if (const char* names = std::getenv("GLOO_SOCKET_IFNAME"); names != nullptr && *names != '\0') {
    std::istringstream list(names);
    for (std::string name; std::getline(list, name, ',');)
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
  } else if (master_addr == "127.0.0.1" || master_addr == "localhost" || master_addr == "::1") {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(master_addr));
  } else {
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}
#else
bool have_gloo() { return false; }

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>&, int, int,
                                                    std::chrono::milliseconds, const std::string&) {
  throw std::invalid_argument(
      "this normlab was built without Gloo's headers (libgloo-dev), so it cannot run several processes; "
      "scripts/install-deps installs them");
}
#endif

}  // namespace normlab::core
