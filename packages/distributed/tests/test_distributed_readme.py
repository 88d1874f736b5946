"""The README's example runs as written, in a world of one process."""

import re
from pathlib import Path

import sadl_distributed as dist

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs(capsys):
    dist.shutdown()
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README should hold a runnable example"
    try:
        for code in blocks:
            exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})
    finally:
        dist.shutdown()
    assert "on 1 process(es)" in capsys.readouterr().out
