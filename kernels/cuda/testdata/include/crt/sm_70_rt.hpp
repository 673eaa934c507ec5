// Empty: clang's __clang_cuda_intrinsics.h includes it from a CUDA installation; NVRTC needs none (nvrtc.h).
