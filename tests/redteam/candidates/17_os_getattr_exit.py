# Class 17, abrupt exit through the part of os a candidate may not use, reached by name: getattr(os,
# "_ex" + "it")(0) in forward ends the process with status 0 and no result. `import os` passes the static
# checks since judge 17 (a build's paths and architectures), but os itself used as a value does not
# (caught statically). With static checks off the judge must still report runtime_error.
import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        getattr(os, "_ex" + "it")(0)
        return torch.relu(x)
