"""Kernel sets published by others, wrapped as candidates the judge can take: each kernel becomes a `ModelNew`
for its shape's task (`hgemm/MxNxK`), with where it came from and its license in the source
(`KERNEL_ORIGIN`), so a verdict, a report and a pack can name it."""

from .imported import ImportedKernel, ImportFailed, KernelSetImport, import_kernel_set, kernel_sets

__all__ = ["ImportFailed", "ImportedKernel", "KernelSetImport", "import_kernel_set", "kernel_sets"]
