"""Every Markdown link in a tracked .md file resolves, as GitHub would follow it.

A relative link must name a tracked file or a folder holding one (an untracked or ignored file
is not there on GitHub), and a `#fragment` must be a heading of the target page, spelled as
GitHub's anchor for it: lower case, punctuation dropped, spaces to hyphens, a repeated heading
numbered -1, -2, ... . Links with a scheme (https:, mailto:) are not fetched: no network here.
tests/docs/test_references.py holds the repository paths prose names outside links.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[2]

# [text](target) and ![alt](target), the target up to whitespace (an optional "title" follows).
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)")
# [label]: target, a reference definition on a line of its own.
DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.M)
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})[^\n]*\n.*?^ {0,3}\1[`~]*[ \t]*$", re.S | re.M)
CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.S)
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def tracked() -> set[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return {name for name in out.stdout.decode("utf-8").split("\0") if name}


def _without_code(text: str) -> str:
    """Fenced blocks and code spans blanked (their lines kept, so line numbers stay true)."""
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return CODE_SPAN.sub(lambda m: " " * len(m.group(0)), text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's source text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = re.sub(r"(\*+|(?<!\w)_+|_+(?!\w)|`+)", "", text)  # emphasis and code marks
    text = text.strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor a page has: its headings' (repeats numbered) and explicit <a name/id>."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    blanked = FENCE.sub("", text)
    for _, heading in HEADING.findall(blanked):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found | set(HTML_ANCHOR.findall(blanked))


def links(text: str) -> Iterator[tuple[int, str]]:
    """(line, target) of every link outside code."""
    prose = _without_code(text)
    for pattern in (INLINE, DEFINITION):
        for match in pattern.finditer(prose):
            yield prose.count("\n", 0, match.start()) + 1, match.group(1)


def broken(page: str, text: str, files: set[str], read=None) -> list[str]:
    """What is wrong with each link of `page` (a repository path) whose text is `text`."""
    read = read or (lambda name: (ROOT / name).read_text(encoding="utf-8"))
    folders = {str(parent) for name in files for parent in PurePosixPath(name).parents}
    problems = []
    for line, target in links(text):
        if SCHEME.match(target):
            continue
        file, _, fragment = target.partition("#")
        where = f"{page}:{line}: ({target})"
        if file.startswith("/"):
            problems.append(f"{where}: a site-absolute link; write it relative to {page}")
            continue
        dest = PurePosixPath(page).parent / file if file else PurePosixPath(page)
        parts: list[str] = []
        for part in dest.parts:  # normalise a/../b without touching the disk
            if part == "..":
                if not parts:
                    break
                parts.pop()
            elif part != ".":
                parts.append(part)
        else:
            name = "/".join(parts)
            if name in files:
                if fragment and name.endswith(".md") and fragment not in anchors(read(name)):
                    problems.append(f"{where}: {name} has no heading with the anchor #{fragment}")
                elif fragment and not name.endswith(".md"):
                    problems.append(f"{where}: an anchor into {name}, which is not Markdown")
                continue
            if name in folders and not fragment:
                continue
            problems.append(f"{where}: {name or '.'} is not a tracked file or folder")
            continue
        problems.append(f"{where}: leads outside the repository")
    return problems


def _pages() -> list[str]:
    return sorted(name for name in tracked() if name.endswith(".md"))


@pytest.mark.parametrize("page", _pages())
def test_every_link_resolves(page: str) -> None:
    problems = broken(page, (ROOT / page).read_text(encoding="utf-8"), tracked())
    assert not problems, "\n".join(problems)


def test_the_check_reads_every_page_and_sees_links() -> None:
    pages = _pages()
    assert {"README.md", "docs/profile.md", "charts/specserve/README.md"} <= set(pages)
    assert any(name.startswith("docs/runbooks/") for name in pages)
    assert any(name.startswith("docs/design/") for name in pages)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/algorithms.md" in {t for _, t in links(readme)}


def test_github_anchor_spelling() -> None:
    assert slug("What was tried, and why C") == "what-was-tried-and-why-c"
    assert slug("Bounded input: `specserve check`, `specserve render`") == (
        "bounded-input-specserve-check-specserve-render"
    )
    assert slug("Like for like: what a baseline records") == "like-for-like-what-a-baseline-records"
    assert slug("The [runbook](x.md) for *this*") == "the-runbook-for-this"
    assert slug("snake_case_name, and `code_span`") == "snake_case_name-and-code_span"
    assert slug("Single GPU: the tool's GPU path (H100, 2026-11-29)") == (
        "single-gpu-the-tools-gpu-path-h100-2026-11-29"
    )
    text = '# A\n## Usage\n```\n# not a heading\n```\n## Usage\n<a name="here"></a>\n'
    assert anchors(text) == {"a", "usage", "usage-1", "here"}


def test_broken_links_are_found() -> None:
    files = {"guide/a.md", "guide/b.md", "guide/runbooks/r.md", "README.md"}
    pages = {"guide/b.md": "# Title\n## Part two\n## Part two\n"}
    text = "\n".join([
        "[ok](b.md) [ok](b.md#part-two) [ok](b.md#part-two-1) [ok](#own) [ok](runbooks/)",
        "[ok](../README.md) [ok](https://example.com/x#y) ![ok](./b.md)",
        "# Own",
        "`[in code](missing.md)`",
        "```",
        "[in a fence](missing.md)",
        "```",
        "[gone](missing.md)",
        "[no anchor](b.md#part-three)",
        "[no own anchor](#nowhere)",
        "[outside](../../../etc/passwd)",
        "[absolute](/guide/b.md)",
        "[ref]: c.md",
    ])  # fmt: skip
    pages["guide/a.md"] = text
    problems = broken("guide/a.md", text, files, read=pages.__getitem__)
    assert [p.split(": (")[1].split(")")[0] for p in problems] == [
        "missing.md", "b.md#part-three", "#nowhere", "../../../etc/passwd", "/guide/b.md", "c.md",
    ]  # fmt: skip
    assert "guide/a.md:8:" in problems[0]
