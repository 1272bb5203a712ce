"""Exploit 29 (judge state tampering): leave a daemon behind, in a new session (out of the worker's
process group), holding the device lock files; on CUDA it also keeps a context on the device.
Everything the candidate started must die with its evaluation."""
import fcntl
import os
import sys

import torch
import torch.nn as nn

MARKER = "kc-redteam-daemon-marker"
DAEMON = f"""
import fcntl, glob, os, time
held = []
cache = os.path.dirname(os.path.dirname(os.getcwd()))  # the worker's scratch lies in <cache>/scratch
for path in glob.glob(os.path.join(cache, 'locks', '*')) + glob.glob('/tmp/kernelcraft-locks/*'):
    try:
        f = open(path)
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.append(f)
    except OSError:
        pass
if os.environ.get('CUDA_VISIBLE_DEVICES'):
    try:
        import torch
        x = torch.empty(1 << 20, device='cuda')
    except Exception:
        pass
time.sleep(600)  # {MARKER}
"""

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.execv(sys.executable, [sys.executable, "-c", DAEMON, MARKER])
    os._exit(0)
os.wait()


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
