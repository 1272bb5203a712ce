"""The judge's static checks over real model replies: which replies they turn down, and for what. Target: no
honest reply rejected by a rule the prompt does not state, and none by a rule that stops nothing the runtime
checks would miss (issue 45: 7 of 36 replies rejected for `import os` and `try`).

    python benchmarks/static_corpus.py ../shared/real-model-corpus/lost-turns ../shared/real-model-corpus/turn1 \\
        ../shared/real-model-corpus/batch/replies-0001.jsonl --out $OUT

Each path is a candidate file (.py), a directory of them, or a batch replies file (.jsonl, the OpenAI batch output
format: each reply's candidate block, as the coder parses it). Prints each reply's verdict from the static stage
and, last, how many replies each finding turned down; writes static_corpus.json under --out. Needs no device and
uses only `check_source` and `extract_candidate`, so the same command measures the checker of any commit (run it
with that commit's `src` on PYTHONPATH for a before-and-after)."""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from kernelcraft.agents.parse import ParseFailure, extract_candidate
from kernelcraft.judge import check_source

_FINDING = re.compile(r"(?:^|; )lines? [\d, ]+: ")


@dataclass(frozen=True)
class Reply:
    """One reply: where it came from, and its candidate source (None: the reply held no candidate)."""

    name: str
    source: str | None


@dataclass(frozen=True)
class Row:
    name: str
    status: str  # "passed", "rejected" or "no candidate"
    findings: list[str]  # each distinct finding, its lines left out


def replies(path: Path) -> list[Reply]:
    """The replies in a candidate file, a directory of candidate files, or a batch replies file."""
    if path.is_dir():
        return [r for p in sorted(path.glob("*.py")) for r in replies(p)]
    if path.suffix == ".jsonl":
        found = []
        for n, line in enumerate(path.read_text().splitlines(), 1):
            body = json.loads(line)["response"]["body"]
            choice = body["choices"][0]
            candidate = extract_candidate(choice["message"]["content"])
            found.append(Reply(f"{path.name}:{n}", None if isinstance(candidate, ParseFailure) else candidate))
        return found
    return [Reply(path.name, path.read_text())]


def judge(reply: Reply) -> Row:
    """The static stage's verdict on one reply."""
    if reply.source is None:
        return Row(reply.name, "no candidate", [])
    report = check_source(reply.source)
    findings = [f for f in _FINDING.split(report.message()) if f]
    return Row(reply.name, "passed" if report.ok else "rejected", list(dict.fromkeys(findings)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", type=Path, help="candidate files, directories of them, batch replies files")
    ap.add_argument("--out", type=Path, default=None, help="where to write static_corpus.json (default: nowhere)")
    args = ap.parse_args()
    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        raise SystemExit(f"error: no such file or directory: {', '.join(missing)}")
    rows = [judge(r) for p in args.paths for r in replies(p)]
    for row in rows:
        print(f"{row.name[:70]:70s} {row.status}")
        for f in row.findings:
            print(f"    {f[:150]}")
    by_finding = Counter(f.split(": ")[0] if ": " in f else f for row in rows for f in row.findings)
    statuses = Counter(row.status for row in rows)
    print(f"\n{'replies':>8s} {'passed':>7s} {'rejected':>9s} {'no candidate':>13s}")
    print(f"{len(rows):8d} {statuses['passed']:7d} {statuses['rejected']:9d} {statuses['no candidate']:13d}")
    if by_finding:
        print(f"\n{'replies':>8s}  finding")
        for what, count in by_finding.most_common():
            print(f"{count:8d}  {what}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "static_corpus.json").write_text(json.dumps([asdict(r) for r in rows], indent=1))


if __name__ == "__main__":
    main()
