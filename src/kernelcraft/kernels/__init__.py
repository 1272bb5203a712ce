"""Kernel libraries that need no model: `gemm`, the GEMM template generators the template search
judges (Triton and CUTLASS kernels, their spaces and priors); `external`, kernel sets others published (CUDA-L2),
wrapped as candidates. A kernel library may import `tasks`
and `judge`, nothing later."""
