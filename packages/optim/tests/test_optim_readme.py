"""The README's example runs as written (docs never drift from the API)."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README should hold a runnable example"
    for code in blocks:
        exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})
    assert "final loss" in capsys.readouterr().out


def test_readme_lists_every_registered_class():
    from sadl_optim import plugin

    text = README.read_text()
    missing = [cls.__name__ for cls in plugin.PROVIDED if f"| `{cls.__name__}" not in text]
    assert not missing, f"packages/optim/README.md does not list: {missing}"
