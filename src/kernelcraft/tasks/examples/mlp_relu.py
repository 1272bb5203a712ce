import torch
import torch.nn as nn

KERNELCRAFT = {
    "description": "Three-layer MLP: Linear -> ReLU -> Linear -> ReLU -> Linear.",
    "tags": ["gemm", "fusion", "mlp"],
    "dtype": "float32",
    "sizes": {"cpu": {"BATCH": 128, "IN_FEATURES": 256, "HIDDEN": 512, "OUT_FEATURES": 256}},
}

# GPU size: 2048 x (1024 -> 4096 -> 4096 -> 1024), 103 GFLOP fp32 (no TF32).
BATCH = 2048
IN_FEATURES = 1024
HIDDEN = 4096
OUT_FEATURES = 1024


class Model(nn.Module):
    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, out_features)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, HIDDEN, OUT_FEATURES]
