"""The README and the pages under docs/ link to each other by relative paths and headings' anchors: every such link
leads to a file of the checkout and, where it names one, to a heading of that file."""

from __future__ import annotations

import re
from pathlib import Path

from .conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", flags=re.S | re.M)


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#{1,6} (.+)$", FENCE.sub("", page.read_text()), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def links(page: Path) -> list[str]:
    return [target for target in LINK.findall(FENCE.sub("", page.read_text()))
            if not re.match(r"[a-z]+:", target)]  # a web address is no file of the checkout


def test_the_anchor_rule_is_githubs() -> None:
    page = ROOT / "docs" / "judge.md"
    assert {"timeouts-and-the-judges-own-failures", "correctness-against-a-float64-truth"} <= anchors(page)


def test_every_relative_link_of_the_readme_and_docs_leads_somewhere() -> None:
    broken = []
    for page in PAGES:
        for target in links(page):
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists() or (anchor and anchor not in anchors(file)):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []
    assert len(links(ROOT / "README.md")) >= 10  # the README points into docs/
