// Argument structs of the test kernels; the Go tests write the same layouts.
#pragma once

struct RMSArgs {
  uint dim;
  float eps;
};

struct MatDims {
  uint M, N, K;
};
