# Class 9, fallback by inheritance: the candidate re-declares the task's Model and makes
# ModelNew a subclass whose forward is super().forward (caught statically: ModelNew inheriting
# from Model, super().forward). With static checks off, coverage must catch it: no custom
# kernel runs (hack_detected).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


class ModelNew(Model):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return super().forward(x)
