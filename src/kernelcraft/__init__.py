"""kernelcraft: LLM-written GPU kernels for PyTorch programs, with a judge that proves every speedup.

The public surface is small: `kernelcraft.tasks` loads tasks, `kernelcraft.judge` evaluates a
candidate against a task, `kernelcraft.store` records what was measured. The judge's worker side
imports only the standard library, torch, numpy and triton, so this module imports nothing heavy.
"""

__version__ = "0.1.0"
