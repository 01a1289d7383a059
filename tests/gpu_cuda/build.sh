#!/usr/bin/env bash
# Builds the H200 proof programs (umem_gpu_tests, umem_cuda_bench, probe_attributes) with the CUDA
# toolkit against an existing umem build, and gathers them with libumem and its non-libc shared
# libraries into one folder that can be carried to a GPU machine.
#   tests/gpu_cuda/build.sh BUILD_DIR OUT_DIR      (BUILD_DIR has libumem.so and umtopo built)
set -euo pipefail
build=$(realpath "$1")
out=$(realpath -m "$2")
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
cuda=${CUDA_PATH:-/usr/local/cuda}
mkdir -p "$out"
inc=()
for layer in core machine allocator hsa_runtime cuda_runtime hip_runtime numa; do inc+=(-I"$src/$layer/include"); done
# sm_90 machine code for Hopper plus compute_90 PTX for anything newer.
"$cuda/bin/nvcc" -std=c++17 -O2 -gencode arch=compute_90,code=[sm_90,compute_90] \
  -c "$here/kernels.cu" -o "$out/kernels.o"
for prog in umem_gpu_tests umem_cuda_bench; do
  g++ -std=c++20 -O2 -Wall -Wextra "${inc[@]}" -I"$cuda/include" "$here/$prog.cpp" "$out/kernels.o" \
    -o "$out/$prog" -L"$build" -lumem -L"$cuda/lib64" -lcudart_static -ldl -lrt -lpthread \
    -Wl,-rpath,'$ORIGIN'
done
g++ -std=c++20 -O2 -Wall -I"$cuda/include" "$here/probe_attributes.cpp" -o "$out/probe_attributes" \
  -L"$cuda/lib64/stubs" -lcuda
cp "$build/tools/umtopo/umtopo" "$out/"
# libumem and every shared library it and umtopo need, except the C/C++ runtimes (the GPU
# machine has its own, newer ones; an older libstdc++ first in the path breaks its ROCr) and the
# driver.
for bin in "$out/umem_gpu_tests" "$out/umtopo"; do
  LD_LIBRARY_PATH="$build" ldd "$bin" | awk '/=> \// {print $3}' |
    grep -vE '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libgcc_s|libstdc\+\+|libcuda)\.so' |
    while read -r lib; do cp -L "$lib" "$out/"; done
done
rm -f "$out/kernels.o"
ls -la "$out"
