// `normlab info`: versions, threads, devices and the measured sgemm rate.
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/gloo_backend.h"
#include "core/nccl_backend.h"
#include "core/runtime.h"

namespace normlab::app {

Runner add_info_command(CLI::App& app, const GlobalOptions& global) {
  auto* cmd = app.add_subcommand("info", "versions, threads, devices and measured GEMM rate");
  auto json = std::make_shared<bool>(false);
  auto skip_gemm = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "print one JSON object");
  cmd->add_flag("--no-gemm", *skip_gemm, "skip the sgemm measurement");
  return [&global, json, skip_gemm] {
    const auto info = core::runtime_info();
    const auto device = core::resolve_device(global.device);
    const double gflops = *skip_gemm ? 0.0 : core::measure_sgemm_gflops(device);
    nlohmann::json j = {{"normlab", info.normlab_version},
                        {"libtorch", info.libtorch_version},
                        {"blas", info.blas},
                        {"onednn", info.onednn},
                        {"cpu_capability", info.cpu_capability},
                        {"cpu_native_bf16", info.cpu_native_bf16},
                        {"cpu_bf16_faster", info.cpu_bf16_faster},
                        {"intra_op_threads", info.intra_op_threads},
                        {"aten_default_threads", info.aten_default_threads},
                        {"available_cpus", info.available_cpus},
                        {"cuda_available", info.cuda_available},
                        {"cuda_devices", info.cuda_devices},
                        {"cuda_device_name", info.cuda_device_name},
                        {"gloo", core::have_gloo()},
                        {"nccl", core::have_nccl()},
                        {"device", device.str()}};
    if (!*skip_gemm) j["sgemm_gflops_2048"] = gflops;
    if (*json) {
      std::cout << j.dump() << "\n";
      return;
    }
    std::cout << "normlab          " << info.normlab_version << "\n"
              << "LibTorch         " << info.libtorch_version << "\n"
              << "BLAS             " << info.blas << "\n"
              << "oneDNN           " << info.onednn << "\n"
              << "CPU capability   " << info.cpu_capability << "\n"
              << "CPU bf16         "
              << (info.cpu_native_bf16.empty() ? "emulated (no AMX-BF16 or AVX512_BF16; --precision auto is fp32)"
                  : info.cpu_bf16_faster
                      ? "native (" + info.cpu_native_bf16 + "; --precision auto is bf16)"
                      : "native (" + info.cpu_native_bf16 + " without AMX on Intel: slower than fp32; --precision auto is fp32)")
              << "\n"
              << "threads          " << info.intra_op_threads << " intra-op (" << info.available_cpus
              << " CPUs available; ATen's own default " << info.aten_default_threads << ")\n"
              << "CUDA             "
              << (info.cuda_available ? std::to_string(info.cuda_devices) + " device(s), " +
                                            info.cuda_device_name
                                      : std::string("not available"))
              << "\n"
              << "collectives      " << (core::have_gloo() ? "gloo" : "one process only (no Gloo)")
              << (core::have_nccl() ? ", nccl" : "") << "\n";
    if (!*skip_gemm)
      std::cout << "sgemm 2048^3     " << gflops << " GFLOP/s on " << device.str()
                << " (median of 5)\n";
  };
}

}  // namespace normlab::app
