// Holds N MiB of GPU memory until killed: on the GPU machine, the stand-in for an app that keeps a fixed share
// (a vLLM server in its quota) or for the memory a smaller card lacks. Build: nvcc -o hold hold.cu
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <cuda_runtime.h>

int main(int argc, char **argv) {
  if (argc != 2) { fprintf(stderr, "usage: hold MIB\n"); return 2; }
  size_t bytes = (size_t)strtoull(argv[1], nullptr, 10) << 20;
  void *block = nullptr;
  cudaError_t err = cudaMalloc(&block, bytes);
  if (err != cudaSuccess) { fprintf(stderr, "hold: %s\n", cudaGetErrorString(err)); return 1; }
  cudaMemset(block, 0, bytes);  // touch it, so the memory is really taken
  cudaDeviceSynchronize();
  printf("holding %s MiB\n", argv[1]);
  fflush(stdout);
  pause();
  return 0;
}
