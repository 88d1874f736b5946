#!/usr/bin/env bash
# The GPU check for an offline GPU machine (a cluster node): sadl's packages installed from wheels
# without network, the device matrix of every package on real CuPy, then the GPU benchmark.
#
#   1. On a machine with network, in the repository root:   bash tools/gpu_check.sh --build
#      builds pure-Python wheels of every sadl package and of the test-only CuPy stand-in
#      (tests/fixtures/plugins/sadl-strictcuda, which also holds the device-matrix pytest plugin)
#      into wheelhouse/ (git-ignored; copy it along with the checkout).
#   2. On the GPU machine, in the repository root:           bash tools/gpu_check.sh
#      It needs Python >= 3.11 with CuPy (cupy-cuda12x or cupy-cuda13x), NumPy, pluggy, pytest,
#      hypothesis, safetensors, tqdm, matplotlib, threadpoolctl and mpi4py installed, and
#      PyTorch for the reference rows; no network, no nox, uv or hatchling. PYTHON picks the interpreter (default
#      python3); the results go to $OUT (default runs/gpu-check).
#
# The run creates a fresh virtual environment that sees the interpreter's own packages (CuPy,
# NumPy, torch ...), installs the wheels into it with pip --no-index, and stops with status 3,
# before any test, when CuPy does not import or sees no GPU. Files written under $OUT:
#   summary.md          versions, GPU, device-matrix counts per package, benchmark table
#   device_matrix.log   pytest -m device_matrix --devices cpu,cuda over every package (this
#                       includes sadl.compile on CUDA: compiled forward, training steps and GPT
#                       steps against eager, and the CUDA graph replay, test_compile_device.py)
#   strict_vs_cupy.log  the stand-in's strictness tests, run against CuPy too
#   gpu_bench.json/.md/.png  W2, W3-S, W3-M steps/s: sadl CPU and CUDA (eager and sadl.compile),
#                       PyTorch CPU and CUDA
#
# SADL_GPU_CHECK_DEVICE=strict rehearses every step without a GPU on the strict CuPy stand-in
# (the benchmark in its --quick form; its timings mean nothing).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WHEELS="$ROOT/wheelhouse"
PY="${PYTHON:-python3}"
DEVICE="${SADL_GPU_CHECK_DEVICE:-cuda}"
PACKAGES=(packages/core packages/layers packages/optim packages/serialize packages/compile
          packages/models packages/distributed tests/fixtures/plugins/sadl-strictcuda)
DISTS=(sadl-core sadl-layers sadl-optim sadl-serialize sadl-compile sadl-models sadl-distributed
       sadl-strictcuda)

if [[ "${1:-}" == "--build" ]]; then
    rm -rf "$WHEELS"
    mkdir -p "$WHEELS"
    (cd "$ROOT" && "$PY" -m pip wheel --quiet --no-deps --wheel-dir "$WHEELS" "${PACKAGES[@]}")
    ls -l "$WHEELS"
    exit 0
fi

OUT="${OUT:-$ROOT/runs/gpu-check}"
mkdir -p "$OUT"
shopt -s nullglob
wheels=("$WHEELS"/*.whl)
if (( ${#wheels[@]} < ${#DISTS[@]} )); then
    echo "gpu_check: no wheels in $WHEELS; build them first: bash tools/gpu_check.sh --build" >&2
    exit 2
fi

# A fresh venv that also sees the interpreter's packages (a .pth file names its site dirs, which
# covers an interpreter that is itself a venv, where --system-site-packages would not reach).
VENV="$(mktemp -d "${TMPDIR:-/tmp}/sadl-gpu-check.XXXXXX")/venv"
if "$PY" -m venv "$VENV" 2>/dev/null; then
    PIP=("$VENV/bin/python" -m pip)
else  # no ensurepip: use the interpreter's own pip for the new environment
    "$PY" -m venv --without-pip "$VENV"
    PIP=("$PY" -m pip --python "$VENV/bin/python")
fi
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$PY" -c 'import site; print("\n".join(site.getsitepackages()))' > "$SITE/parent_env.pth"
echo "== offline install into $VENV (pip --no-index --find-links $WHEELS)"
install=("${PIP[@]}" install --quiet --no-index --find-links "$WHEELS" --disable-pip-version-check)
if ! "${install[@]}" "${DISTS[@]}"; then
    # A preinstalled dependency older than a sadl package asks (mpi4py, say): install sadl's
    # own wheels anyway; the tests show whether the older one serves.
    echo "gpu_check: a dependency above is unmet offline; installing sadl's wheels with --no-deps"
    "${install[@]}" --no-deps "${DISTS[@]}"
fi
VPY="$VENV/bin/python"
"$VPY" -c 'import sadl, sadl_layers, sadl_optim, sadl_serialize, sadl_models, sadl_distributed
print("installed:", ", ".join(p["name"] + " " + p["version"] for p in sadl.plugins.plugins()))'

echo "== CuPy and the GPU"
if [[ "$DEVICE" != cuda ]]; then
    echo "rehearsal on the device type $DEVICE (no CuPy needed)"
elif ! "$VPY" - <<'EOF'
import sys

try:
    import cupy
except Exception as exc:  # ImportError, or a CUDA library that fails to load
    sys.exit(f"CuPy does not import here ({type(exc).__name__}: {exc}): stopping before the tests")
count = cupy.cuda.runtime.getDeviceCount()
if count == 0:
    sys.exit("CuPy sees no GPU: stopping before the tests")
name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
print(f"cupy {cupy.__version__}, {count} device(s), device 0: {name}")
EOF
then
    exit 3
fi

export SADL_PLUGINS_STRICT=1 PYTHONDONTWRITEBYTECODE=1
cd "$ROOT"
echo "== device matrix on $DEVICE (and the CPU rows beside it)"
set +e
"$VPY" -m pytest -p no:cacheprovider -q -m device_matrix --devices "cpu,$DEVICE" \
    packages/core/tests packages/layers/tests packages/optim/tests packages/serialize/tests \
    packages/compile/tests packages/models/tests packages/distributed/tests tests \
    --ignore=tests/thirdparty -rf \
    --junitxml "$OUT/device_matrix.xml" \
    > "$OUT/device_matrix.log" 2>&1
matrix_status=$?
"$VPY" -m pytest -p no:cacheprovider -q tests/test_strict_standin.py -rf \
    > "$OUT/strict_vs_cupy.log" 2>&1
strict_status=$?
set -e
tail -n 3 "$OUT/device_matrix.log"
tail -n 1 "$OUT/strict_vs_cupy.log"

echo "== GPU benchmark"
bench_status=0
quick=()
[[ "$DEVICE" == cuda ]] || quick=(--quick)
env -u OPENBLAS_CORETYPE "$VPY" bench/gpu.py --device "$DEVICE" "${quick[@]}" --out "$OUT" \
    || bench_status=$?

"$VPY" - "$OUT" "$DEVICE" <<'EOF'
import platform
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import numpy
import sadl

out, target = Path(sys.argv[1]), sys.argv[2]
lines = ["# sadl GPU check", ""]
if target == "cuda":
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    lines.append(f"* GPU: {props['name'].decode()}, CuPy {cupy.__version__}")
else:
    lines.append(f"* a rehearsal on the device type {target!r}, without a GPU")
lines.append(f"* NumPy {numpy.__version__}")
lines.append(f"* Python {platform.python_version()}, sadl-core {sadl.__version__}")
try:
    import torch

    lines.append(f"* PyTorch {torch.__version__} (CUDA available: {torch.cuda.is_available()})")
except ImportError:
    lines.append("* PyTorch not installed")
lines += ["", f"## Device matrix (pytest -m device_matrix --devices cpu,{target})", ""]
lines += ["| package | device | passed | failed | skipped |", "|---|---|---|---|---|"]
counts: Counter = Counter()
for case in ET.parse(out / "device_matrix.xml").iter("testcase"):
    path = case.get("classname", "")
    package = path.split(".")[1] if path.startswith("packages.") else "ecosystem"
    name = case.get("name", "")
    ids = name.partition("[")[2].rstrip("]").split("-") if "[" in name else []
    device = target if target in ids or (not ids and "cuda" in name) else "cpu"
    state = "passed"
    if case.find("failure") is not None or case.find("error") is not None:
        state = "failed"
    elif case.find("skipped") is not None:
        state = "skipped"
    counts[(package, device, state)] += 1
for package, device in sorted({(p, d) for p, d, _ in counts}):
    row = [counts[(package, device, s)] for s in ("passed", "failed", "skipped")]
    lines.append(f"| {package} | {device} | {row[0]} | {row[1]} | {row[2]} |")
strict = (out / "strict_vs_cupy.log").read_text().strip().splitlines()
against = "the stand-in and CuPy" if target == "cuda" else "the stand-in only (no CuPy here)"
lines += ["", f"Stand-in strictness tests, on {against}: {strict[-1] if strict else '?'}", ""]
bench = out / "gpu_bench.md"
if bench.exists():
    lines += ["## Benchmark (bench/gpu.py)", "", bench.read_text()]
(out / "summary.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
rm -f "$OUT/device_matrix.xml"  # summarized above; the log keeps the details
exit $(( matrix_status || strict_status || bench_status ))
