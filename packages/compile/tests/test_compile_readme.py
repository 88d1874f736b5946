"""The README's example runs as written: traced once, replayed twice, the graph printed."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README should hold a runnable example"
    namespace = {"__name__": "readme_example"}
    for code in blocks:
        exec(compile(code, str(README), "exec"), namespace)
    assert namespace["step"].stats.traces == 1 and namespace["step"].stats.replays == 2
    assert "SGD.step" in capsys.readouterr().out
