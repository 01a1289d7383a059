// Launchers of the kernels in kernels.cu; each returns the cudaError_t of the launch as an int.
#pragma once

#include <cstddef>
#include <cstdint>

int launch_scale(std::uint32_t* p, std::size_t n, void* stream);
int launch_ping_pong(std::uint32_t* to_gpu, std::uint32_t* to_cpu, std::uint32_t rounds,
                     std::uint64_t timeout_ns, int* status, void* stream);
int launch_wait_flag(std::uint32_t* flag, std::uint64_t timeout_ns, std::uint32_t* done,
                     void* stream);
int launch_read_all(const void* p, std::size_t bytes, std::uint32_t* sink, void* stream);
