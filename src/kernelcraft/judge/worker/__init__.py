"""The judge's worker side: what runs in a sandboxed process, where a candidate's code runs or may have
run. Nothing here is trusted by the parent side (the judge's other modules), and nothing here imports
it: only the standard library, torch, numpy and triton, the messages (judge/protocol.py) and the
configuration they carry (judge/config.py), and the task runtime (tests/test_worker_imports.py).

- confine.py, landlock.py: the first code of every sandboxed process (the parent starts it as
  `python -I -S -c confine.BOOT`), which confines it and then runs its module:
- loop.py: the worker, one command at a time (protocol.py's messages, on channel.py's line); its
  commands are the trusted reference's (reference_ops.py) and the candidate's (candidate_ops.py), on
  the state of state.py, ending short of an answer with rejection.py's Rejection;
- builder.py: the builder, which compiles one candidate extension for the judge.
- What they use: timing.py, coverage.py and launches.py (the profiled call), guards.py and
  guard_zones.py, compare.py and expected.py (the trusted comparison), exchange.py (outputs shared
  without files), buildcache.py, buildstore.py and integrity.py (the build cache, read only), ceilings.py.

How it starts without the parent side: importing `kernelcraft.judge.worker.loop` runs
`kernelcraft/__init__` and `kernelcraft/judge/__init__` first, as any subpackage import does. Both stay
cheap: the judge's public names load lazily (PEP 562 `__getattr__` in judge/__init__), so nothing of the
pool, the sandbox or the evaluation is imported in a worker, nor runs in it before it is confined.
This file imports nothing.
"""
