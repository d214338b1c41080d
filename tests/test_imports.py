"""Importing the package: fast, imports no heavy library, and the accessors appear whenever
pandas / Dask / cuDF get imported (before or after gpualign_df). Every test runs a fresh
interpreter, since what matters is what one import does to a clean process."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Libraries that ``import gpualign_df`` must leave alone (each costs 0.1-3 s to import).
HEAVY = ("numpy", "pandas", "pyarrow", "numba", "dask", "dask.dataframe", "distributed",
         "cudf", "cupy")
DNA = dict(match=2, mismatch=-3, gap_open=5, gap_extend=2, backend="cpu")


def run_python(code: str, *, path: tuple[Path, ...] = ()) -> dict:
    """Run ``code`` in a fresh interpreter (the checkout first on its path, then ``path``);
    returns the JSON object it prints on its last line. Fails on a non-zero exit and on a
    warning of a failed accessor registration (those do not fail the import itself)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *map(str, path),
                                         env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "gpualign_df:" not in result.stderr, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_import_imports_no_heavy_library():
    out = run_python(f"""
        import json, sys
        import gpualign_df
        print(json.dumps({{"heavy": [m for m in {HEAVY!r} if m in sys.modules],
                          "engine": "gpualign_df.api" in sys.modules}}))
    """)
    assert out == {"heavy": [], "engine": False}


def test_import_takes_well_under_a_second():
    """Timed inside the interpreter (its own start-up excluded); the median of 3 runs, so
    that one run slowed by other work on the machine does not decide. Importing pandas,
    numba and Dask eagerly took 1.0-4.7 s."""
    code = """
        import json, time
        start = time.perf_counter()
        import gpualign_df
        print(json.dumps({"seconds": time.perf_counter() - start}))
    """
    seconds = statistics.median(run_python(code)["seconds"] for _ in range(3))
    assert seconds < 0.5, f"import gpualign_df took {seconds:.3f} s (median of 3)"


def test_pandas_imported_afterwards_gets_aln():
    out = run_python(f"""
        import json, sys
        import gpualign_df
        assert "pandas" not in sys.modules
        import pandas as pd
        before_engine = "gpualign_df.api" in sys.modules
        reads = pd.Series(["ACGT", None, "ACGA"], index=["a", "b", "c"])
        mates = pd.Series(["ACTT", "AC", "ACGA"], index=["a", "b", "c"])
        rows = reads.aln.rowwise(mates, **{DNA!r})
        print(json.dumps({{"engine_before_use": before_engine,
                          "score": [None if s is pd.NA else int(s) for s in rows["score"]],
                          "cigar": [c if isinstance(c, str) else None for c in rows["cigar"]],
                          "own_align": type(pd.Series.align).__name__}}))
    """)
    assert out == {"engine_before_use": False, "score": [4, None, 8],
                   "cigar": ["2=", None, "4="], "own_align": "function"}


def test_dask_imported_afterwards_gets_aln_and_keeps_its_own_align():
    out = run_python(f"""
        import json, sys
        import gpualign_df
        import dask.dataframe as dd
        import pandas as pd
        engine = "gpualign_df.api" in sys.modules
        seqs = dd.from_pandas(pd.Series(["ACGT", "ACGA", "TCGA"]), npartitions=2)
        pairs = seqs.aln.pairwise(**{DNA!r}).compute(scheduler="sync")
        left = dd.from_pandas(pd.Series([1.0, 2.0], index=[0, 1]), npartitions=1)
        right = dd.from_pandas(pd.Series([5.0], index=[1]), npartitions=1)
        aligned, _ = left.align(right)      # Dask's own index alignment
        print(json.dumps({{"engine_before_use": engine,
                          "pairs": pairs[["query", "target"]].values.tolist(),
                          "dask_align": aligned.compute(scheduler="sync").tolist()}}))
    """)
    assert out == {"engine_before_use": False, "pairs": [[0, 1], [0, 2], [1, 2]],
                   "dask_align": [1.0, 2.0]}


def test_libraries_imported_before_get_the_accessors():
    out = run_python(f"""
        import json
        import pandas as pd, dask.dataframe as dd
        import gpualign_df
        seqs = pd.Series(["ACGT", "ACGA"])
        print(json.dumps({{
            "pandas": seqs.aln.pairwise(**{DNA!r})["score"].tolist(),
            "dask": dd.from_pandas(seqs, npartitions=1).aln.pairwise(**{DNA!r})
                      .compute(scheduler="sync")["score"].tolist()}}))
    """)
    assert out == {"pandas": [6], "dask": [6]}


def test_dask_accessor_module_imported_first():
    """Importing the Dask accessor module itself imports dask.dataframe, whose import hook
    then finds that module half-executed: the accessor must be registered all the same."""
    out = run_python("""
        import json
        from gpualign_df.dask.accessor import plan_blocks
        import dask.dataframe as dd, pandas as pd
        print(json.dumps({"aln": hasattr(dd.from_pandas(pd.Series(["A"]), npartitions=1),
                                          "aln")}))
    """)
    assert out == {"aln": True}


def test_public_functions_on_first_use():
    out = run_python("""
        import json, sys
        import gpualign_df
        listed = sorted(set(gpualign_df.__all__) & set(dir(gpualign_df)))
        scoring = type(gpualign_df.make_scoring(match=1, mismatch=-1)).__name__
        frame = gpualign_df.align(["ACGTACGT"], ["TTACGTACGTTT"], how="rowwise", mode="sw",
                                  match=2, mismatch=-3, backend="cpu")
        print(json.dumps({"listed": listed, "score": int(frame["score"][0]),
                          "blast": list(gpualign_df.blast_to_gap_costs(11, 1)),
                          "modes": gpualign_df.parse_mode("local") ==
                                   gpualign_df.parse_mode("sw") !=
                                   gpualign_df.parse_mode("nw"),
                          "cluster": callable(gpualign_df.cluster), "scoring": scoring,
                          "shown": str(gpualign_df.view(frame, ["ACGTACGT"], ["TTACGTACGTTT"],
                                                        match=2, mismatch=-3)).count("|"),
                          "plots": callable(gpualign_df.dot_plot),
                          # after align imported its module, still the function
                          "database": type(gpualign_df.database).__name__,
                          "matplotlib": "matplotlib" in sys.modules}))
    """)
    assert out["listed"] == sorted(["align", "align_batches", "make_scoring", "parse_mode",
                                    "blast_to_gap_costs", "cluster", "view", "dot_plot",
                                    "database", "read_database", "Database"])
    assert out["database"] == "function"
    assert out["score"] == 16 and out["blast"] == [12, 1]
    assert out["scoring"] == "Scoring" and out["modes"] and out["cluster"]
    assert out["shown"] == 8 and out["plots"] and not out["matplotlib"]


def test_unknown_attribute_is_an_attribute_error():
    import gpualign_df

    with pytest.raises(AttributeError, match="no_such_name"):
        gpualign_df.no_such_name   # noqa: B018


FAKE_CUDF = {
    "cudf/__init__.py": "from . import api\nclass Series:\n    pass\n",
    "cudf/api/__init__.py": "from . import extensions\n",
    "cudf/api/extensions.py": textwrap.dedent("""
        registered = []
        def register_series_accessor(name):
            def register(cls):
                import cudf
                registered.append(name)
                setattr(cudf.Series, name, property(lambda self: cls(self)))
                return cls
            return register
    """),
}


@pytest.mark.parametrize("order", ["cudf first", "gpualign_df first"])
def test_cudf_gets_align_and_aln_when_imported(tmp_path, order):
    """A stand-in ``cudf`` package (this machine has none) records the registrations: cuDF
    Series get ``.align`` and ``.aln`` whichever is imported first, and importing
    gpualign_df first does not import cuDF."""
    for name, text in FAKE_CUDF.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    first, second = ("cudf", "gpualign_df") if order == "cudf first" else \
        ("gpualign_df", "cudf")
    out = run_python(f"""
        import json, sys
        import {first}
        before = "cudf" in sys.modules
        import {second}
        import cudf
        print(json.dumps({{"cudf_before": before,
                          "registered": cudf.api.extensions.registered,
                          "accessor": type(cudf.Series().aln).__name__}}))
    """, path=(tmp_path,))
    assert out == {"cudf_before": order == "cudf first", "registered": ["align", "aln"],
                   "accessor": "SeriesAlignAccessor"}


# ---------------------------------------------------------------------------------------------
# gpualign_df.libraries: the import hook itself


def test_when_imported_runs_after_the_module_with_its_own_loader(tmp_path):
    """The callback runs once per import, after the module's code (it sees the module's
    names), the module keeps its own loader (so importlib.resources and friends work), a
    failing callback is a warning and the import succeeds; installed() finds a submodule
    without importing its package."""
    package = tmp_path / "hooked_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 42\n")
    (package / "data.txt").write_text("payload")
    out = run_python("""
        import importlib, importlib.resources, json, sys, warnings
        from gpualign_df import libraries
        seen = []
        libraries.when_imported("hooked_pkg", lambda module: seen.append(module.VALUE))
        def broken(module):
            raise RuntimeError("boom")
        libraries.when_imported("hooked_pkg", broken)
        found = [libraries.installed("hooked_pkg"), libraries.installed("json.decoder"),
                 libraries.installed("hooked_pkg.nothing"), libraries.installed("no_such")]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import hooked_pkg
        loader = type(hooked_pkg.__loader__).__name__
        spec_loader = type(hooked_pkg.__spec__.loader).__name__
        text = importlib.resources.files("hooked_pkg").joinpath("data.txt").read_text()
        del sys.modules["hooked_pkg"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            importlib.import_module("hooked_pkg")
        print(json.dumps({"seen": seen, "loader": loader, "spec_loader": spec_loader,
                          "text": text, "found": found,
                          "warnings": [str(w.message) for w in caught],
                          "loaded": libraries.loaded("hooked_pkg")}))
    """, path=(tmp_path,))
    assert out["seen"] == [42, 42]
    assert out["loader"] == out["spec_loader"] == "SourceFileLoader"
    assert out["text"] == "payload"
    assert out["found"] == [True, True, False, False]
    assert len(out["warnings"]) == 1 and "boom" in out["warnings"][0] \
        and "hooked_pkg" in out["warnings"][0]
    assert out["loaded"]


def test_installed_does_not_import():
    out = run_python("""
        import json, sys
        from gpualign_df import libraries
        found = libraries.installed("dask.dataframe"), libraries.installed("pandas")
        print(json.dumps({"found": found, "imported": [m for m in ("dask", "pandas")
                                                       if m in sys.modules]}))
    """)
    assert out == {"found": [True, True], "imported": []}


# ---------------------------------------------------------------------------------------------
# optional libraries absent or not imported


def test_release_scratch_without_cupy_is_a_no_op():
    """On a CPU install (this machine has no CuPy; the CUDA simulator off, as a user's
    process has it) release_scratch drops the cached buffers and raises nothing."""
    env_code = """
        import json, os, sys
        os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
        from gpualign_df import gpu
        gpu.SCRATCH[("buffer", 0)] = object()
        gpu.TABLES[("table", 0)] = (b"", object())
        gpu.release_scratch()
        print(json.dumps({"cached": len(gpu.SCRATCH) + len(gpu.TABLES),
                          "simulator": gpu.simulator(), "cupy": "cupy" in sys.modules}))
    """
    out = run_python(env_code)
    assert out == {"cached": 0, "simulator": False, "cupy": False}


def test_release_scratch_empties_cupy_pool_where_cupy_is_used(monkeypatch):
    """Where CuPy is imported and a GPU usable, its pools' cached blocks are freed, the
    device pool's and the pinned pool's (a stand-in CuPy records the calls); with CuPy
    imported but no usable GPU, nothing is."""
    import types

    from gpualign_df import gpu

    freed = []
    fake = types.ModuleType("cupy")
    fake.get_default_memory_pool = lambda: types.SimpleNamespace(
        free_all_blocks=lambda: freed.append("device"))
    fake.get_default_pinned_memory_pool = lambda: types.SimpleNamespace(
        free_all_blocks=lambda: freed.append("pinned"))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(gpu, "simulator", lambda: False)
    monkeypatch.setattr(gpu, "gpu_usable", lambda: False)
    gpu.release_scratch()
    assert freed == []
    monkeypatch.setattr(gpu, "gpu_usable", lambda: True)
    gpu.release_scratch()
    assert freed == ["device", "pinned"]
