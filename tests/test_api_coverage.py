"""tools/api_coverage.py: PyTorch's public names against singa_tensor's, without PyTorch."""

from __future__ import annotations

import fnmatch
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("api_coverage", ROOT / "tools" / "api_coverage.py")
api_coverage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(api_coverage)


def test_counts_present_missing_and_left_out_names(tmp_path):
    names = {"torch_version": "x", "namespaces": {"torch": ["tensor", "zeros", "no_such_op",
                                                            "quantize_per_tensor"]}}
    scope = {"all": [["quantize*", "quantization is not supported"]], "torch": []}
    (tmp_path / "n.json").write_text(json.dumps(names))
    (tmp_path / "s.json").write_text(json.dumps(scope))
    n, s = api_coverage.load(str(tmp_path / "n.json"), str(tmp_path / "s.json"))
    cov = api_coverage.coverage(n, s, {"torch": "singa_tensor"})["torch"]
    assert cov["present"] == ["tensor", "zeros"]
    assert cov["missing"] == ["no_such_op"]
    assert cov["excluded"] == {"quantize_per_tensor": "quantization is not supported"}
    assert abs(cov["ratio"] - 2 / 3) < 1e-12


def test_a_namespace_that_does_not_exist_counts_nothing_present():
    names = {"torch_version": "x", "namespaces": {"torch.linalg": ["inv"]}}
    cov = api_coverage.coverage(names, {}, {"torch.linalg": "singa_tensor.no_such_module"})
    assert cov["torch.linalg"]["missing"] == ["inv"]


def test_every_left_out_pattern_matches_a_name_and_gives_a_reason():
    names, scope = api_coverage.load()
    all_names = {n for v in names["namespaces"].values() for n in v}
    for ns, rules in scope.items():
        if ns.startswith("_"):
            continue
        pool = all_names if ns == "all" else set(names["namespaces"][ns])
        for pattern, reason in rules:
            assert reason.strip(), (ns, pattern)
            assert any(fnmatch.fnmatchcase(n, pattern) for n in pool), (
                f"{ns}: {pattern!r} matches no PyTorch name (stale)")


def test_every_namespace_maps_to_ours_and_the_table_prints(capsys):
    names, _ = api_coverage.load()
    assert set(names["namespaces"]) == set(api_coverage.OURS)
    assert api_coverage.main([]) == 0
    out = capsys.readouterr().out
    for ns in api_coverage.OURS:
        assert ns in out


def test_coverage_reaches_the_targets():
    """The namespaces scripts use most have at least TARGETS of PyTorch's names in scope."""
    names, scope = api_coverage.load()
    cov = api_coverage.coverage(names, scope)
    low = {ns: f"{cov[ns]['ratio']:.1%} < {t:.0%}; missing: {' '.join(cov[ns]['missing'][:20])}"
           for ns, t in api_coverage.TARGETS.items() if cov[ns]["ratio"] < t}
    assert not low, low
