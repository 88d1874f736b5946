"""The README's lines, verbatim, from a fresh clone: the set-up line, then the Quick start
snippets under ``.venv/bin/python``; then the "Developing" lines (every package editable, and
the root ``pytest`` collects everything without an error).

The lines are read from README.md, not copied here. The clone is ``git clone`` of this
checkout's committed HEAD. pip fetches numpy, pluggy and the tools from the package index, so
this needs the network and takes a few minutes: ``nox -s docs`` runs it (``SADL_FRESH_CLONE=1``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BASH = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
PYTHON = re.compile(r"^```python\n(.*?)^```", re.S | re.M)

pytestmark = [
    pytest.mark.skipif(
        os.environ.get("SADL_FRESH_CLONE") != "1",
        reason="clones this repository and installs from the package index (a few minutes, "
        "needs the network): nox -s docs runs it, or set SADL_FRESH_CLONE=1",
    ),
    # One clone for both tests, in order: the Developing lines run in the set-up line's .venv.
    pytest.mark.xdist_group("fresh_clone"),
]


def section(heading: str) -> str:
    """The text of the README's ``## heading`` section."""
    start = README.index(f"\n## {heading}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def shell(line: str, cwd: Path, timeout: int = 900, **extra: str) -> str:
    """Run ``line`` with bash in ``cwd`` as a newcomer would: no venv active, no sadl settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SADL_", "PYTEST_"))}
    env.pop("PYTHONPATH", None)
    venv = env.pop("VIRTUAL_ENV", None)  # the nox session's: off PATH, so python3 is the system's
    if venv:
        keep = [p for p in env["PATH"].split(os.pathsep) if not p.startswith(venv)]
        env["PATH"] = os.pathsep.join(keep)
    env.update(extra)
    start = time.perf_counter()
    result = subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    print(f"{time.perf_counter() - start:6.1f} s  {line}")
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"`{line}` exited {result.returncode}:\n{output[-4000:]}"
    return output


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout: nothing to clone")
    dest = tmp_path_factory.mktemp("fresh") / "sadl"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(dest)], check=True)
    return dest


def test_the_quick_start_runs_right_after_the_set_up_line(clone):
    (setup,) = BASH.findall(section("Set up, then two commands"))[0].strip().splitlines()
    shell(setup, clone)
    snippets = PYTHON.findall(section("Quick start"))
    assert len(snippets) == 2
    for i, snippet in enumerate(snippets):
        (clone / "quick.py").write_text(snippet)
        out = shell(".venv/bin/python quick.py", clone)
        print(f"Quick start snippet {i + 1}: {out.strip()}")
        assert out.strip() and "Error" not in out
    assert "sadl-layers" in shell(".venv/bin/sadl plugins", clone)  # the plugins came too
    assert shell(".venv/bin/nox --version", clone).strip()  # and nox, for the two commands


def test_the_developing_lines_install_what_the_root_pytest_needs(clone):
    if not (clone / ".venv").exists():
        pytest.skip("the set-up line did not run (see the Quick start test)")
    # (Without some packages their tests are skipped, saying why: tests/test_newcomers.py.)
    # The README's two lines, verbatim: the install, and pytest (collecting everything).
    install, run_tests = BASH.findall(section("Developing"))[0].strip().splitlines()
    shell(install, clone)
    out = shell(run_tests, clone, PYTEST_ADDOPTS="--collect-only -rs -p no:cacheprovider")
    summary = out.strip().splitlines()[-1]  # "N tests collected in T s" (", M errors" if any)
    print(f"{run_tests}: {summary}")
    assert re.fullmatch(r"\d+ tests collected in [\d.]+s", summary), out[-3000:]
    assert int(summary.split()[0]) > 2000
    assert "is not installed" not in out, out[-3000:]  # nothing optional is missing now
    # The optional packages' tests run there, for real.
    some = "tests/test_strict_standin.py packages/distributed/tests/test_distributed_world.py"
    shell(f".venv/bin/python -m pytest -q -p no:cacheprovider {some}", clone)
