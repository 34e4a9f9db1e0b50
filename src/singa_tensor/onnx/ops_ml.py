"""ONNX import handlers for the classical machine-learning ops of the ai.onnx.ml domain:
LabelEncoder (a lookup table between strings, integers and floats) and TreeEnsemble (a
decision-tree ensemble, ai.onnx.ml opset 5).

Both are table lookups without a gradient, computed in numpy on the host; their outputs are
tensors on the node's device (strings stay host arrays, see ops_string.py).
"""

from __future__ import annotations

import math

import numpy as np

from ._graph import is_strings
from ._handlers import handler, string_handler
from .ops_math import _need

_ML = "ai.onnx.ml"


# ---- LabelEncoder --------------------------------------------------------------------------------


def _table_side(node, attrs, side: str):
    """The keys or values of a LabelEncoder: (numpy array, kind 's', 'i' or 'f'), from the
    `<side>_strings/_int64s/_floats` attributes or (opset 4) `<side>_tensor`."""
    given = [k for k in (f"{side}_strings", f"{side}_int64s", f"{side}_floats", f"{side}_tensor")
             if k in attrs]
    if len(given) != 1:
        raise node.fail(f"needs exactly one of {side}_strings, {side}_int64s, {side}_floats or "
                        f"{side}_tensor, got {given or 'none'}")
    (key,) = given
    v = attrs[key]
    if key.endswith("_strings"):
        return np.asarray(v, dtype=object), "s"
    if key.endswith("_int64s"):
        return np.asarray(v, dtype=np.int64), "i"
    if key.endswith("_floats"):
        return np.asarray(v, dtype=np.float32), "f"
    a = np.asarray(v).reshape(-1)
    kind = "s" if a.dtype.kind in "USO" else "f" if a.dtype.kind == "f" else "i"
    return (a.astype(object) if kind == "s" else a), kind


_DEFAULTS = {"s": ("default_string", "_Unused"), "i": ("default_int64", -1),
             "f": ("default_float", -0.0)}


def _default(node, attrs, values: np.ndarray, kind: str):
    if "default_tensor" in attrs:
        d = np.asarray(attrs["default_tensor"]).reshape(-1)
        if d.size != 1:
            raise node.fail(f"default_tensor must hold one value, got {d.size}")
        return d.astype(object)[0] if kind == "s" else d.astype(values.dtype)[0]
    name, value = _DEFAULTS[kind]
    return attrs.get(name, value)


def _key(v, kind: str):
    """A dictionary key: floats compared as float32, every NaN the same key."""
    if kind == "f":
        v = float(np.float32(v))
        return "nan" if math.isnan(v) else v
    return v if kind == "s" else int(v)


@handler(f"{_ML}::LabelEncoder")
@string_handler(f"{_ML}::LabelEncoder")
def label_encoder(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    if node.opset < 2:
        classes = np.asarray(attrs.get("classes_strings", []), dtype=object)
        keys, kkind = (classes, "s") if is_strings(x) else \
            (np.arange(len(classes), dtype=np.int64), "i")
        values, vkind = (np.arange(len(classes), dtype=np.int64), "i") if is_strings(x) else \
            (classes, "s")
        default = attrs.get("default_int64", -1) if vkind == "i" else \
            attrs.get("default_string", "_Unused")
    else:
        keys, kkind = _table_side(node, attrs, "keys")
        values, vkind = _table_side(node, attrs, "values")
        default = _default(node, attrs, values, vkind)
    if len(keys) != len(values):
        raise node.fail(f"{len(keys)} keys but {len(values)} values")
    got = "s" if is_strings(x) else "f" if x.dtype.is_floating_point else "i"
    if got != kkind:
        names = {"s": "strings", "i": "integers", "f": "floats"}
        raise node.fail(f"the keys are {names[kkind]}, the input holds {names[got]}")
    table = {_key(k, kkind): v for k, v in zip(keys.tolist(), values.tolist())}
    flat = x.reshape(-1).tolist() if is_strings(x) else \
        np.asarray(x.detach().cpu().numpy()).reshape(-1).tolist()
    out = [table.get(_key(v, kkind), default) for v in flat]
    if vkind == "s":
        res = np.empty(len(out), dtype=object)
        res[:] = out
        return res.reshape(x.shape)
    return node.const(np.asarray(out, dtype=values.dtype).reshape(x.shape))


# ---- TreeEnsemble --------------------------------------------------------------------------------

_LEQ, _LT, _GTE, _GT, _EQ, _NEQ, _MEMBER = range(7)
_AVERAGE, _SUM, _MIN, _MAX = range(4)


def _array(node, attrs, name: str, dtype=None, required: bool = True):
    v = attrs.get(name)
    if v is None:
        if required:
            raise node.fail(f"attribute {name!r} is required")
        return None
    a = np.asarray(v).reshape(-1)
    return a if dtype is None else a.astype(dtype)


def _members(node, modes: np.ndarray, values) -> dict:
    """node index -> its set (a sorted array) for the BRANCH_MEMBER nodes: membership_values
    holds the sets in node order, each ended by a NaN."""
    member_nodes = np.flatnonzero(modes == _MEMBER)
    if not len(member_nodes):
        return {}
    if values is None:
        raise node.fail("BRANCH_MEMBER nodes need the membership_values attribute")
    values = np.asarray(values, dtype=np.float64)
    ends = np.flatnonzero(np.isnan(values))
    if len(ends) != len(member_nodes):
        raise node.fail(f"membership_values holds {len(ends)} NaN-terminated sets for "
                        f"{len(member_nodes)} BRANCH_MEMBER nodes")
    sets, start = {}, 0
    for n, end in zip(member_nodes.tolist(), ends.tolist()):
        sets[n] = np.unique(values[start:end])
        start = end + 1
    return sets


def _post_transform(node, y: np.ndarray, kind: int) -> np.ndarray:
    if kind == 0:
        return y
    if kind == 1:  # SOFTMAX over the targets
        e = np.exp(y - y.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if kind == 2:  # LOGISTIC
        return 1.0 / (1.0 + np.exp(-y))
    if kind == 3:  # SOFTMAX_ZERO: zeros stay zero and take no share
        nz = y != 0
        m = np.where(nz, y, -np.inf).max(axis=1, keepdims=True)
        e = np.where(nz, np.exp(y - np.where(np.isfinite(m), m, 0.0)), 0.0)
        s = e.sum(axis=1, keepdims=True)
        return np.divide(e, s, out=np.zeros_like(e), where=s > 0)
    if kind == 4:  # PROBIT: the standard normal quantile
        from ..ops._special_np import erfinv

        return math.sqrt(2.0) * erfinv(2.0 * y - 1.0)
    raise node.fail(f"post_transform must be 0 to 4 (NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, "
                    f"PROBIT), got {kind}")


@handler(f"{_ML}::TreeEnsemble")
def tree_ensemble(node, inputs, attrs):
    _need(node, inputs, 1)
    x_t = inputs[0]
    if x_t.ndim != 2 or not x_t.dtype.is_floating_point:
        raise node.fail(f"X must be a 2-d float tensor [N, features], got {x_t.dtype.name} of "
                        f"shape {list(x_t.shape)}")
    # half types are read in float32, the only numpy form bfloat16 has here
    x = np.asarray((x_t if x_t.dtype.itemsize > 2 else x_t.float()).detach().cpu().numpy())
    n, nfeat = x.shape
    modes = _array(node, attrs, "nodes_modes", np.int64)
    feats = _array(node, attrs, "nodes_featureids", np.int64)
    splits = _array(node, attrs, "nodes_splits", x.dtype)
    t_ids = _array(node, attrs, "nodes_truenodeids", np.int64)
    f_ids = _array(node, attrs, "nodes_falsenodeids", np.int64)
    t_leaf = _array(node, attrs, "nodes_trueleafs", np.int64).astype(bool)
    f_leaf = _array(node, attrs, "nodes_falseleafs", np.int64).astype(bool)
    tracks = _array(node, attrs, "nodes_missing_value_tracks_true", np.int64, False)
    leaf_targets = _array(node, attrs, "leaf_targetids", np.int64)
    leaf_w = _array(node, attrs, "leaf_weights", np.float64)
    roots = _array(node, attrs, "tree_roots", np.int64)
    n_targets = attrs.get("n_targets")
    if n_targets is None or n_targets < 1:
        raise node.fail(f"n_targets must be a positive int, got {n_targets}")
    nn_, nl = len(modes), len(leaf_targets)
    tracks = np.zeros(nn_, bool) if tracks is None else tracks.astype(bool)
    if any(len(a) != nn_ for a in (feats, splits, t_ids, f_ids, t_leaf, f_leaf, tracks)):
        raise node.fail("the nodes_* attributes must all have one entry per node")
    if len(leaf_w) != nl:
        raise node.fail(f"{nl} leaf_targetids but {len(leaf_w)} leaf_weights")
    bad = [(name, int(v)) for name, a, hi in
           (("nodes_featureids", feats, nfeat), ("tree_roots", roots, nn_),
            ("leaf_targetids", leaf_targets, n_targets), ("nodes_modes", modes, 7))
           for v in a if not 0 <= v < hi]
    bad += [(name, int(i)) for name, ids, leaf in (("nodes_truenodeids", t_ids, t_leaf),
                                                  ("nodes_falsenodeids", f_ids, f_leaf))
            for i, is_leaf in zip(ids, leaf) if not 0 <= i < (nl if is_leaf else nn_)]
    if bad:
        raise node.fail(f"{bad[0][0]} entry {bad[0][1]} is out of range")
    sets = _members(node, modes, attrs.get("membership_values"))
    agg = attrs.get("aggregate_function", _SUM)
    if agg not in (_AVERAGE, _SUM, _MIN, _MAX):
        raise node.fail(f"aggregate_function must be 0 to 3 (AVERAGE, SUM, MIN, MAX), got {agg}")

    y = np.zeros((n, n_targets), dtype=np.float64)
    seen = np.zeros((n, n_targets), dtype=bool)  # MIN and MAX: targets a tree has reached
    rows = np.arange(n)
    for root in roots.tolist():
        if t_leaf[root] and f_leaf[root] and t_ids[root] == f_ids[root]:
            leaf = np.full(n, t_ids[root])  # a tree that is a single leaf
        else:
            leaf = _walk(node, x, root, modes, feats, splits, t_ids, f_ids, t_leaf, f_leaf,
                         tracks, sets)
        tgt, w = leaf_targets[leaf], leaf_w[leaf]
        if agg in (_SUM, _AVERAGE):
            np.add.at(y, (rows, tgt), w)
        else:
            pick = np.minimum if agg == _MIN else np.maximum
            cur = y[rows, tgt]
            y[rows, tgt] = np.where(seen[rows, tgt], pick(cur, w), w)
            seen[rows, tgt] = True
    if agg == _AVERAGE and len(roots):
        y /= len(roots)
    y = _post_transform(node, y, attrs.get("post_transform", 0))
    out = node.const(y.astype(x.dtype))
    return out if out.dtype is x_t.dtype else out.to(x_t.dtype)


def _walk(node, x, root, modes, feats, splits, t_ids, f_ids, t_leaf, f_leaf, tracks, sets):
    """The leaf index that every row of x reaches from root."""
    n = len(x)
    cur = np.full(n, root)
    done = np.zeros(n, dtype=bool)
    for _ in range(len(modes) + 1):
        live = np.flatnonzero(~done)
        if not len(live):
            return cur
        at = cur[live]
        v = x[live, feats[at]]
        s = splits[at]
        mode = modes[at]
        go = np.select([mode == _LEQ, mode == _LT, mode == _GTE, mode == _GT, mode == _EQ,
                        mode == _NEQ], [v <= s, v < s, v >= s, v > s, v == s, v != s], False)
        for m in np.unique(at[mode == _MEMBER]).tolist():
            here = at == m
            go[here] = np.isin(v[here], sets[m])
        go |= np.isnan(v) & tracks[at]
        nxt = np.where(go, t_ids[at], f_ids[at])
        cur[live] = nxt
        done[live] = np.where(go, t_leaf[at], f_leaf[at])
    raise node.fail(f"the tree at root {root} has a cycle")
