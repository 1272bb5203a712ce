"""The agents' roles: prompts (jinja2 templates), model calls through `kernelcraft.llm`, and
parsing of replies into candidates. Agents never time anything; the judge does."""

from .coder import LANGUAGES, Coder, Proposal
from .parse import ParseFailure, extract_candidate
from .prompts import render

__all__ = ["LANGUAGES", "Coder", "ParseFailure", "Proposal", "extract_candidate", "render"]
