"""Kernel libraries that need no model: `gemm`, the GEMM template generators the template search
judges (Triton and CUTLASS kernels, their spaces and priors). A kernel library may import `tasks`
and `judge`, nothing later."""
