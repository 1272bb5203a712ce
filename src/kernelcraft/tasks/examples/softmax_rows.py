import torch
import torch.nn as nn

KERNELCRAFT = {
    "description": "Softmax over each row of x / temperature.",
    "tags": ["reduction", "softmax", "fusion"],
    "dtype": "float32",
    "sizes": {"cpu": {"M": 4096, "N": 512}},
}

# GPU size: 64M elements (256 MB in, 256 MB out). Rows are kept short (512) so that
# softmax outputs (~2e-3 on average) stay well above the 1e-4 absolute tolerance.
M = 131072
N = 512
TEMPERATURE = 0.8


class Model(nn.Module):
    def __init__(self, temperature):
        super().__init__()
        self.temperature = temperature

    def forward(self, x):
        return torch.softmax(x / self.temperature, dim=-1)


def get_inputs():
    return [torch.randn(M, N)]


def get_init_inputs():
    return [TEMPERATURE]
