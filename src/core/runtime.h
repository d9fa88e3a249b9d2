// Process-wide compute set-up: intra-op threads, device choice, and what `normlab info` shows.
#pragma once

#include <string>

#include <c10/core/Device.h>

namespace normlab::core {

// CPUs this process may run on: the affinity mask, capped by a cgroup CPU quota if one is set.
int available_cpus();

// Sets ATen's intra-op thread count to `requested` if > 0, else to available_cpus().
// Returns the count in force. (ATen's own default follows the hardware, not the quota.)
int configure_threads(int requested);
// ATen's own intra-op thread count as it was before configure_threads() first changed it.
int aten_default_threads();

// Tells glibc's malloc to keep freed memory instead of handing big blocks back to the kernel
// (mmap threshold 1 GiB, trim threshold 2 GiB, top pad 256 MiB): a training step allocates
// and frees the same large tensors every time, and fresh pages fault on first touch
// (REFERENCE §6; docs/performance.md: -15% per bf16 step, +11% peak memory). Leaves malloc
// alone where the environment sets MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_,
// MALLOC_TOP_PAD_ or GLIBC_TUNABLES. Returns whether it changed anything.
bool configure_memory();

// "cpu", "cuda", "cuda:N" or "auto" (cuda when available, else cpu). Throws
// std::invalid_argument for anything else, or for cuda when this build or machine has none.
c10::Device resolve_device(const std::string& name);

// The CPU's bf16 matrix-product instructions named in a /proc/cpuinfo text: "amx_bf16" (AMX
// tiles), else "avx512_bf16" (dot products), else "" (none: ATen and oneDNN then convert bf16 to
// float in software, about 8x slower than fp32 on an AVX2 machine; docs/precision.md).
std::string native_bf16_in_cpuinfo(const std::string& cpuinfo);
// The same for this machine (its /proc/cpuinfo; "" where it cannot be read).
std::string cpu_native_bf16();
// Whether the CPU a /proc/cpuinfo text describes multiplies bf16 faster than fp32, which is what
// `--precision auto` asks: with AMX-BF16 (tiles: 4-8x fp32), or AVX512_BF16 on a CPU that is not
// Intel's (AMD Zen 4: VDPBF16PS at twice the fp32 FMA's rate; 2.7x measured). Not AVX512_BF16 on
// an Intel CPU without AMX (Cooper Lake, or a Xeon whose AMX a VM hides): there VDPBF16PS issues
// on one port where fp32 FMAs issue on two, the same FLOP rate before conversions; 0.5-0.6x of
// fp32 measured (docs/precision.md). Not without either (emulated).
bool bf16_faster_in_cpuinfo(const std::string& cpuinfo);
// The same for this machine (false where /proc/cpuinfo cannot be read).
bool cpu_bf16_faster();

struct RuntimeInfo {
  std::string normlab_version;
  std::string libtorch_version;
  std::string blas;            // e.g. "Intel(R) oneAPI Math Kernel Library Version 2024.2..."
  std::string onednn;          // e.g. "Intel(R) MKL-DNN v3.12.0"
  std::string cpu_capability;  // ATen's vectorisation level, e.g. "AVX512"
  std::string cpu_native_bf16; // cpu_native_bf16()
  bool cpu_bf16_faster = false; // cpu_bf16_faster(): what --precision auto follows on the CPU
  int intra_op_threads = 0;
  int aten_default_threads = 0;
  int available_cpus = 0;
  bool cuda_available = false;
  int cuda_devices = 0;
  std::string cuda_device_name;
};
RuntimeInfo runtime_info();

// Median GFLOP/s of `repeats` float32 n x n x n matrix products on `device` (after one warm-up).
double measure_sgemm_gflops(const c10::Device& device, int n = 2048, int repeats = 5);

}  // namespace normlab::core
