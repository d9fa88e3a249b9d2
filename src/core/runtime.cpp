#include "core/runtime.h"

#include <climits>
#include <cstdlib>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <torch/torch.h>
#include <torch/version.h>
#ifdef NORMLAB_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace normlab::core {
namespace {

// cgroup v2 `cpu.max` ("max 100000" or "200000 100000"); 0 when unlimited or absent.
int cgroup_cpu_quota() {
  std::ifstream in("/sys/fs/cgroup/cpu.max");
  std::string quota;
  long period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return 0;
  return static_cast<int>(std::ceil(std::stod(quota) / static_cast<double>(period)));
}

// The line of at::show_config() that contains `key`, trimmed of its "  - " bullet.
std::string config_line(const std::string& key) {
  std::istringstream config(at::show_config());
  for (std::string line; std::getline(config, line);) {
    if (line.find(key) == std::string::npos) continue;
    auto start = line.find_first_not_of(" -");
    return start == std::string::npos ? line : line.substr(start);
  }
  return "none";
}

int& aten_default() {
  static int threads = 0;
  return threads;
}

// This machine's /proc/cpuinfo, read once ("" where it cannot be read).
const std::string& proc_cpuinfo() {
  static const std::string text = [] {
    std::ifstream in("/proc/cpuinfo");
    std::stringstream out;
    out << in.rdbuf();
    return out.str();
  }();
  return text;
}

}  // namespace

int aten_default_threads() {
  if (aten_default() == 0) aten_default() = at::get_num_threads();
  return aten_default();
}

int available_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  int quota = cgroup_cpu_quota();
  if (quota > 0) cpus = std::min(cpus, quota);
  return std::max(cpus, 1);
}

bool configure_memory() {
#ifdef __GLIBC__
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES"})
    if (std::getenv(name) != nullptr) return false;
  return mallopt(M_MMAP_THRESHOLD, 1 << 30) == 1 && mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1 &&
         mallopt(M_TOP_PAD, 256 << 20) == 1;
#else
  return false;
#endif
}

int configure_threads(int requested) {
  if (requested < 0) {
    throw std::invalid_argument("--threads must be >= 1 (or 0 for automatic), got " +
                                std::to_string(requested));
  }
  aten_default_threads();  // remember ATen's choice before overriding it
  int threads = requested > 0 ? requested : available_cpus();
  at::set_num_threads(threads);
  return at::get_num_threads();
}

c10::Device resolve_device(const std::string& name) {
  if (name == "auto") {
    return torch::cuda::is_available() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  }
  if (name != "cpu" && name.rfind("cuda", 0) != 0) {
    throw std::invalid_argument("--device must be cpu, cuda, cuda:N or auto, got '" + name + "'");
  }
  c10::Device device(c10::kCPU);
  try {
    device = c10::Device(name);
  } catch (const std::exception&) {
    throw std::invalid_argument("--device must be cpu, cuda, cuda:N or auto, got '" + name + "'");
  }
  if (device.is_cuda()) {
    const auto count = static_cast<int>(torch::cuda::device_count());
    if (count == 0) {
      throw std::invalid_argument("--device " + name +
                                  ": no CUDA device (this LibTorch build or machine has none)");
    }
    if (device.has_index() && device.index() >= count) {
      throw std::invalid_argument("--device " + name + ": only " + std::to_string(count) +
                                  " CUDA device(s)");
    }
  }
  return device;
}

std::string native_bf16_in_cpuinfo(const std::string& cpuinfo) {
  std::istringstream in(cpuinfo);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;  // "flags\t\t: fpu vme ..." (x86)
    std::istringstream words(line.substr(line.find(':') == std::string::npos ? 0 : line.find(':') + 1));
    bool amx = false, avx512 = false;
    for (std::string w; words >> w;) {
      amx = amx || w == "amx_bf16";
      avx512 = avx512 || w == "avx512_bf16";
    }
    return amx ? "amx_bf16" : avx512 ? "avx512_bf16" : "";
  }
  return "";
}

bool bf16_faster_in_cpuinfo(const std::string& cpuinfo) {
  const auto instructions = native_bf16_in_cpuinfo(cpuinfo);
  if (instructions != "avx512_bf16") return instructions == "amx_bf16";
  std::istringstream in(cpuinfo);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("vendor_id", 0) == 0) return line.find("GenuineIntel") == std::string::npos;
  }
  return true;  // no vendor line: native taken as faster, as before the vendor was read
}

std::string cpu_native_bf16() { return native_bf16_in_cpuinfo(proc_cpuinfo()); }

bool cpu_bf16_faster() { return bf16_faster_in_cpuinfo(proc_cpuinfo()); }

RuntimeInfo runtime_info() {
  RuntimeInfo info;
  info.normlab_version = NORMLAB_VERSION;
  info.libtorch_version = TORCH_VERSION;
  info.blas = config_line("Math Kernel Library");
  if (info.blas == "none") info.blas = config_line("BLAS_INFO");
  info.onednn = config_line("MKL-DNN");
  info.cpu_native_bf16 = cpu_native_bf16();
  info.cpu_bf16_faster = cpu_bf16_faster();
  info.cpu_capability = config_line("CPU capability");
  if (auto colon = info.cpu_capability.find(": "); colon != std::string::npos)
    info.cpu_capability = info.cpu_capability.substr(colon + 2);
  info.intra_op_threads = at::get_num_threads();
  info.aten_default_threads = aten_default_threads();
  info.available_cpus = available_cpus();
  info.cuda_available = torch::cuda::is_available();
  info.cuda_devices = static_cast<int>(torch::cuda::device_count());
#ifdef NORMLAB_WITH_CUDA
  if (info.cuda_available) info.cuda_device_name = at::cuda::getDeviceProperties(0)->name;
#endif
  return info;
}

double measure_sgemm_gflops(const c10::Device& device, int n, int repeats) {
  torch::NoGradGuard no_grad;
  auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  auto a = torch::randn({n, n}, options);
  auto b = torch::randn({n, n}, options);
  auto c = torch::empty({n, n}, options);
  auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize();
  };
  torch::mm_out(c, a, b);  // warm-up: first call allocates and picks kernels
  sync();
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    auto start = std::chrono::steady_clock::now();
    torch::mm_out(c, a, b);
    sync();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(seconds.begin(), seconds.begin() + repeats / 2, seconds.end());
  return 2.0 * std::pow(static_cast<double>(n), 3) / seconds[repeats / 2] / 1e9;
}

}  // namespace normlab::core
