"""The README a newcomer reads: every option of `bench run` / `bench sweep` in its options table, every
relative link of the README and the guides pointing at a file (and heading) that exists, and a size
that stays readable. No training run: the edit loop runs it."""
from __future__ import annotations

import argparse
import re
import unicodedata
from pathlib import Path

import pytest

from bench.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAX_README_BYTES = 20 * 1024
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def _subcommand_options(name: str) -> set[str]:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {option for action in subparsers.choices[name]._actions for option in action.option_strings
            if option not in ("-h", "--help")}


def _options_table() -> str:
    """The table lines under the README's `## Options` heading, up to the next `## ` heading."""
    text = README.read_text(encoding="utf-8")
    match = re.search(r"^## Options\s*$(.*?)(?=^## )", text, re.S | re.M)
    assert match, "README.md has no '## Options' section"
    return "\n".join(line for line in match.group(1).splitlines() if line.lstrip().startswith("|"))


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_every_option_is_in_the_readme_table(command):
    table = _options_table()
    missing = sorted(option for option in _subcommand_options(command)
                     if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", table))
    assert not missing, f"`bench {command}` options missing from README.md's options table: {missing}"


def _documents() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "results").glob("*/README.md"))]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*]|<[^>]+>", "", heading.strip()).lower()
    text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.M):
        slug = _slug(heading)
        anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def _links(path: Path) -> list[tuple[Path, str]]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans are not links
    return [(path, target) for target in LINK.findall(text)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I)]  # http:, https:, mailto: ...


def test_readme_and_guides_exist():
    assert (ROOT / "docs").is_dir() and list((ROOT / "docs").glob("*.md")), "no guides in docs/"
    linked = {target for _, target in _links(README)}
    for guide in sorted((ROOT / "docs").glob("*.md")):
        assert f"docs/{guide.name}" in linked, f"README.md does not link docs/{guide.name}"


@pytest.mark.parametrize("document", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(document):
    broken = []
    for source, target in _links(document):
        file_part, _, anchor = target.partition("#")
        resolved = (source.parent / file_part).resolve() if file_part else source
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target} (no heading for #{anchor})")
    assert not broken, f"{document.relative_to(ROOT)}: broken links: {broken}"


def test_readme_stays_short():
    size = len(README.read_bytes())
    assert size <= MAX_README_BYTES, f"README.md is {size} bytes; keep it under {MAX_README_BYTES} (move detail to docs/)"
