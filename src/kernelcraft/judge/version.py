"""The judge's version, recorded in every verdict (`env.judge_version`) and part of the key verdicts are reused by: a
change that can change a verdict raises it. What each version changed: docs/judge-versions.md."""

JUDGE_VERSION = "17"

__all__ = ["JUDGE_VERSION"]
