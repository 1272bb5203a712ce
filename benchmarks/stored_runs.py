"""The command line shared by the benchmarks that read a workspace's stored template runs (no device):
`--workspace WS [RUN ...]`, every template run by default."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from kernelcraft.store import Store  # noqa: E402


@contextmanager
def template_runs(description: str) -> Iterator[tuple[Store, list[str]]]:
    """The workspace's store and the runs asked for; a one-line error and exit 2 without a workspace."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("runs", nargs="*", help="Template runs (default: all in the workspace).")
    args = ap.parse_args()
    if not (args.workspace / "kernelcraft.db").is_file():
        print(f"error: no workspace database at {args.workspace}/kernelcraft.db", file=sys.stderr)
        raise SystemExit(2)
    with Store(args.workspace) as store:
        yield store, args.runs or [r.id for r in store.runs("optimize") if r.args["search"]["strategy"] == "template"]
