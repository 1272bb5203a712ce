# Class 17, abrupt exit: os._exit(0) in forward ends the process at once with status 0 and no
# result (caught statically: os beyond a build's paths and architectures). With static checks off the judge must still report
# runtime_error (a missing result is a failure, whatever the exit status).
import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        os._exit(0)
        return torch.relu(x)
