"""The documents: generated pages up to date, every configuration key documented, the README short, no project
history in documents, and every Python code block in README.md and docs/ either run here or marked as not run with
its reason (``<!-- not run: REASON -->`` on the line before the block)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
HISTORY = re.compile(r"\bstop [0-9]+\b|\bissue [0-9]+\b|\bthe former\b", re.IGNORECASE)


def test_generated_pages_are_up_to_date():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_docs.py"), "--check"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _keys(config: dict, path: str = ""):
    for k, v in config.items():
        if isinstance(v, dict):
            yield from _keys(v, f"{path}{k}.")
        else:
            yield f"{path}{k}"


def test_the_configuration_reference_lists_every_key_elecsolver_config_prints():
    from elecsolver.cli import parallel_defaults
    from elecsolver.problems import REGISTRY, get_problem_class

    page = (ROOT / "docs" / "configuration.md").read_text()
    shared, per_problem = page.split("\n## Per problem\n")
    sections = dict(re.findall(r"\n### ([\w\-]+)\n(.*?)(?=\n### |\Z)", per_problem, flags=re.S))
    assert sorted(sections) == sorted(REGISTRY)
    for key in _keys({"parallel": parallel_defaults()}):
        assert f"| `{key}` |" in shared, key
    for name in REGISTRY:
        cls = get_problem_class(name)
        for preset in cls.presets:  # a key only some presets have is listed with them
            for key in _keys(cls.preset_config(preset)):
                assert f"| `{key}` |" in sections[name] or f"| `{key}` |" in shared, (name, preset, key)
    # and says what each key means (a problem's own keys: its `meanings`, or the pattern its name follows)
    blank = [row.split("|")[1].strip() for row in page.splitlines() if row.startswith("| `") and row.endswith("|  |")]
    assert blank == [], blank


def test_the_readme_is_short_and_no_document_speaks_of_the_projects_history():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
    files = [ROOT / "README.md", *DOCS, *(ROOT / "benchmarks").glob("*.md"),
             *(p for d in ("elecsolver", "problems", "parallel") for p in (ROOT / d).rglob("*.py"))]
    hits = [f"{p.relative_to(ROOT)}:{n}" for p in files for n, line in enumerate(p.read_text().splitlines(), 1)
            if HISTORY.search(line)]
    assert not hits


def _python_blocks():
    for path in [ROOT / "README.md", *DOCS]:
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.strip() == "```python":
                end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
                before = lines[i - 1].strip() if i else ""
                skip = re.match(r"<!-- not run: (.+) -->", before)
                yield pytest.param("\n".join(lines[i + 1:end]), skip.group(1) if skip else None,
                                   id=f"{path.name}:{i + 1}")


@pytest.mark.parametrize("code, reason", list(_python_blocks()))
def test_every_python_block_in_the_docs_runs_or_says_why_not(code, reason, tmp_path):
    if reason is not None:
        assert len(reason) >= 10, "say why the block is not run"
        pytest.skip(f"not run: {reason}")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
