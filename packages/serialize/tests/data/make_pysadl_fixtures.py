"""Write the reference files in ``pysadl-2.0.0/`` with the real py-sadl 2.0.0 (not with sadl).

py-sadl's import name is also ``sadl``, so it runs in its own interpreter::

    pip download py-sadl==2.0.0 --no-deps -d /tmp/pysadl
    unzip /tmp/pysadl/py_sadl-2.0.0-py3-none-any.whl -d /tmp/pysadl/x
    PYTHONPATH=/tmp/pysadl/x python packages/serialize/tests/data/make_pysadl_fixtures.py

``expected_objects()`` (pure NumPy) is also what the tests compare the files with.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent / "pysadl-2.0.0"


def expected_objects() -> dict[str, np.ndarray | OrderedDict[str, np.ndarray]]:
    """File name -> what it holds: a bare array (``__single__``) or an ordered mapping."""
    every_dtype: OrderedDict[str, np.ndarray] = OrderedDict()
    names = [
        "float32", "float64", "float16", "int8", "int16", "int32", "int64",
        "uint8", "uint16", "uint32", "uint64", "complex64", "complex128",
    ]  # fmt: skip
    for i, name in enumerate(names):
        values = np.arange(-3, 9).reshape(3, 4) * (i + 1)
        if name.startswith("complex"):
            values = values + 1j * values[::-1]
        if name.startswith("uint"):
            values = np.abs(values)
        every_dtype[f"t.{name}"] = values.astype(name)
    every_dtype["t.bool"] = (np.arange(12).reshape(3, 4) % 3 == 0).astype(bool)
    return {
        "single_float64.sadl": np.array(3.5, dtype=np.float64),
        "every_dtype.sadl": every_dtype,
        "shapes.sadl": OrderedDict(
            [
                ("scalar", np.array(-7, dtype=np.int32)),
                ("empty", np.zeros((0, 3), dtype=np.float32)),
                ("größe/λ→🙂", np.linspace(0, 1, 5, dtype=np.float64)),
                ("", np.ones((2, 1, 2), dtype=np.float16)),
                ("z.last", np.array([1.5], dtype=np.float32)),
            ]
        ),
    }


def main() -> None:
    import sadl  # py-sadl 2.0.0, from PYTHONPATH

    assert sadl.__version__ in ("2.0.0", "0.0.0.dev0"), sadl.__version__
    HERE.mkdir(exist_ok=True)
    for name, obj in expected_objects().items():
        if isinstance(obj, np.ndarray):
            data = sadl.tensor(obj)
        else:
            data = OrderedDict((k, sadl.tensor(v)) for k, v in obj.items())
        sadl.save(data, str(HERE / name))
        print("wrote", HERE / name)


if __name__ == "__main__":
    main()
