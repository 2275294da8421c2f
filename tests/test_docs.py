"""The docs name only what exists: every relative link resolves (file and anchor), every
repository path written in backticks is a file or folder of the checkout, and
``docs/agents.md`` stays a reference page (at most 400 lines)."""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The pages a reader opens.
DOCS = sorted(
    {
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        ROOT / "BENCHMARKS.md",
        *ROOT.glob("docs/**/*.md"),
        *ROOT.glob("agents/pretrained/*.md"),
    }
)

#: Folders at the root whose files a page may name by path.
REPO_DIRS = (
    "agents",
    "baselines",
    "configs",
    "docs",
    "gpu_sharing_env",
    "gpu_sharing_gym",
    "scripts",
    "tests",
)

#: Paths that name what a command writes, or what lies outside the repository: never checked.
#: ``runs/``, ``out/``: a command's output folder; ``~/``, ``$``: the user's files;
#: ``../shared/``: the shared data beside the checkout; the rest are files inside a run or
#: leaderboard directory (``gsg train`` and ``gsg leaderboard`` write them).
OUTPUT_PREFIXES = (
    "runs/",
    "out/",
    "~/",
    "$",
    "../shared/",
    "/tmp/",
    "DIR/",
    "RUN/",
    "tb/",
    "plots/",
    "cells/",
    "checkpoints/",
    "models/",
)

#: Where a page may name a file relative to its package (``sim/online.py`` for
#: ``gpu_sharing_env/sim/online.py``, ``fidelity/pai.yaml`` for a scenario).
PACKAGE_ROOTS = ("gpu_sharing_env", "gpu_sharing_gym", "configs/scenarios")

#: Files inside third-party artifacts that a page cites as their source (not in this
#: repository): iGniter's profiles, Tally's benchmark results.
THIRD_PARTY = ("resource/config/", "tally_results_demo/")

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.M)
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
FENCE = re.compile(r"^\s*(```|~~~)")
#: ``dir/sub/file.ext`` or ``dir/sub/``: a path-shaped token, no spaces or placeholders.
PATH_TOKEN = re.compile(r"^(?:\.\./)*[A-Za-z0-9_.~-]+(?:/[A-Za-z0-9_.*-]+)+/?$")


def _split(text: str) -> tuple[list[str], list[str]]:
    """The page's prose lines and its fenced code lines."""
    prose: list[str] = []
    code: list[str] = []
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        (code if fenced else prose).append(line)
    return prose, code


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: Markdown marks dropped, lower case, punctuation other
    than ``-`` and ``_`` removed, each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link reads as its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").strip().lower()
    return "".join(
        "-" if ch == " " else ch
        for ch in text
        if ch in " -_" or unicodedata.category(ch)[0] in "LN"
    )


@cache
def anchors(page: Path) -> frozenset[str]:
    prose, _ = _split(page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in prose:
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        s = slug(m.group(2))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return frozenset(out)


def _links(page: Path) -> list[str]:
    prose, _ = _split(page.read_text(encoding="utf-8"))
    text = "\n".join(CODE_SPAN.sub("", line) for line in prose)
    return LINK.findall(text) + REF_LINK.findall(text)


def broken_links(page: Path) -> list[str]:
    bad = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading with that anchor in {_shown(dest)}")
    return bad


def _is_output(token: str) -> bool:
    return token.startswith(OUTPUT_PREFIXES + THIRD_PARTY)


def _exists(token: str, page: Path) -> bool:
    token = token.rstrip("/")
    bases = [ROOT, page.parent, *(ROOT / r for r in PACKAGE_ROOTS)]
    if any(ch in token for ch in "*?["):
        return any(any(b.glob(token)) for b in bases)
    # ``sim/faults.propagates``: a function of a module, named by the module's path
    module = re.sub(r"\.[A-Za-z_]\w*$", ".py", token)
    return any((b / token).exists() or (b / module).exists() for b in bases)


def repo_paths(page: Path) -> list[str]:
    """Path-shaped tokens of a page: every code span of its prose that looks like
    ``dir/file.ext`` (or starts with one of the repository's folders), and the words of its
    code blocks that start with one of the repository's folders."""
    prose, code = _split(page.read_text(encoding="utf-8"))
    tokens = []
    for line in prose:
        for _, span in CODE_SPAN.findall(line):
            span = span.strip()
            if not PATH_TOKEN.match(span):
                continue
            first = span.split("/")[0]
            if first in REPO_DIRS or first == ".." or re.search(r"\.[A-Za-z0-9]+$", span):
                tokens.append(span)
    for line in code:
        for word in re.split(r"[\s=,'\"()]+", line):
            word = word.rstrip(".:;")
            if PATH_TOKEN.match(word) and word.split("/")[0] in REPO_DIRS:
                tokens.append(word)
    return tokens


def missing_paths(page: Path) -> list[str]:
    return sorted({t for t in repo_paths(page) if not _is_output(t) and not _exists(t, page)})


def _shown(p: Path) -> str:
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else p.name


def _id(p: Path) -> str:
    return str(p.relative_to(ROOT))


@pytest.mark.parametrize("page", DOCS, ids=_id)
def test_relative_links_resolve(page: Path) -> None:
    assert broken_links(page) == []


@pytest.mark.parametrize("page", DOCS, ids=_id)
def test_named_repository_paths_exist(page: Path) -> None:
    assert missing_paths(page) == []


def test_agents_page_is_a_reference_page() -> None:
    lines = (ROOT / "docs" / "agents.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 400, f"docs/agents.md has {lines} lines; experiment logs go to docs/notes/"


def test_no_page_cites_a_design_file_outside_the_repository() -> None:
    """``DESIGN.md`` is not part of the repository: a page states the contract itself."""
    cited = [
        _id(p) for p in DOCS if re.search(r"(?<![./\w])DESIGN\.md", p.read_text(encoding="utf-8"))
    ]
    assert cited == []


def test_the_checker_catches_what_it_is_for(tmp_path: Path) -> None:
    """A broken link, a wrong anchor and a missing path are reported; outputs are not."""
    (tmp_path / "env.md").write_text("# Env\n\n## Rewards\n", encoding="utf-8")
    page = tmp_path / "probe.md"
    page.write_text(
        "# A page\n\n## Its `second` part: yes\n\n"
        "[ok](#its-second-part-yes) [bad anchor](#nope) [gone](missing.md) "
        "[env](env.md#rewards) [env](env.md#speed) [img](img/nothing.png) [web](https://x.org)\n\n"
        "`scripts/bench.py` `scripts/no_such.py` `runs/ppo/best_model.zip` "
        "`docs/nowhere.md` `../shared/data/PROVENANCE.md` `env.md`\n\n"
        "```bash\npython scripts/gone.py --out runs/x\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page) == [
        "#nope: no heading with that anchor in probe.md",
        "missing.md: no such file",
        "env.md#speed: no heading with that anchor in env.md",
        "img/nothing.png: no such file",
    ]
    assert missing_paths(page) == ["docs/nowhere.md", "scripts/gone.py", "scripts/no_such.py"]


def test_slugs_follow_github() -> None:
    assert slug("The shipped agent: `ppo`") == "the-shipped-agent-ppo"
    assert slug("`GpuSharing-v1`: option-agnostic observations") == (
        "gpusharing-v1-option-agnostic-observations"
    )
    assert slug("Cells, determinism, resume") == "cells-determinism-resume"
    assert slug("What we tried (2026-11-27)") == "what-we-tried-2026-11-27"
