"""What a model must satisfy before it is imported, checked once at load.

- External data: an initializer (or tensor attribute) stored outside the model file is read
  from the model's folder only. Its location must be a relative path that stays inside that
  folder after resolving `..` and symbolic links; a model given as bytes, a file object without
  a path, or a ModelProto needs an explicit `base_dir`. The model handed in is never changed:
  the tensors are filled in on a copy.
- Opsets: each `opset_import` of the standard domains names a version the installed `onnx`
  knows, and each standard op exists at its domain's opset (LayerNormalization needs 17).
- Attributes have the types their op's schema gives them (`perm` is INTS, not FLOATS).
- Single assignment and order: every value is written once (by one node, or as a graph input
  or initializer), and every node input is produced before the node runs, in the graph or, in
  a subgraph, by the enclosing scope (the ONNX rule that nodes are topologically sorted).
"""

from __future__ import annotations

import os

from ._handlers import OnnxImportError

_EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL
_STANDARD = ("", "ai.onnx.ml")


def _tensors(graph):
    """Every TensorProto stored in graph and its subgraphs: initializers and tensor attributes."""
    import onnx

    A = onnx.AttributeProto
    yield from graph.initializer
    for node in graph.node:
        for a in node.attribute:
            if a.type == A.TENSOR:
                yield a.t
            elif a.type == A.TENSORS:
                yield from a.tensors
            elif a.type == A.GRAPH:
                yield from _tensors(a.g)
            elif a.type == A.GRAPHS:
                for g in a.graphs:
                    yield from _tensors(g)


def _has_external(model) -> bool:
    return any(t.data_location == _EXTERNAL for t in _tensors(model.graph))


def _external_file(t, base: str) -> tuple:
    """(path, offset, length) of an external tensor, refused unless it lies inside base."""
    info = {e.key: e.value for e in t.external_data}
    where = f"onnx load: initializer {t.name!r}"
    loc = info.get("location", "")
    if not loc:
        raise OnnxImportError(f"{where}: external data without a location")
    norm = loc.replace("\\", "/")
    if os.path.isabs(loc) or norm.startswith("/") or (len(norm) > 1 and norm[1] == ":"):
        raise OnnxImportError(f"{where}: external data location {loc!r} is an absolute path; "
                              "it must be relative to the model's folder")
    if ".." in norm.split("/"):
        raise OnnxImportError(f"{where}: external data location {loc!r} leaves the model's "
                              "folder ('..' is not allowed)")
    root = os.path.realpath(base)
    path = os.path.realpath(os.path.join(root, loc))
    if os.path.commonpath([root, path]) != root:
        raise OnnxImportError(f"{where}: external data location {loc!r} resolves to {path}, "
                              f"outside the model's folder {root} (a symbolic link out)")
    try:
        offset = int(info.get("offset", 0) or 0)
        length = int(info["length"]) if info.get("length") else None
    except ValueError:
        raise OnnxImportError(f"{where}: external data offset/length are not integers") from None
    if offset < 0 or (length is not None and length < 0):
        raise OnnxImportError(f"{where}: negative external data offset or length")
    return path, offset, length


def load_external(model, base_dir):
    """model with every external tensor read in from base_dir (a copy; model if it has none)."""
    if not _has_external(model):
        return model
    if base_dir is None:
        raise OnnxImportError(
            "onnx load: the model keeps tensors in external data files, which are read from "
            "the model's folder; pass base_dir=... when loading from bytes, a file object or a "
            "ModelProto (or load from the model's path)")
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for t in _tensors(copy.graph):
        if t.data_location != _EXTERNAL:
            continue
        path, offset, length = _external_file(t, base_dir)
        try:
            with open(path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                if offset > size or (length is not None and offset + length > size):
                    raise OnnxImportError(
                        f"onnx load: initializer {t.name!r}: external data file {path} holds "
                        f"{size} bytes, fewer than offset {offset} + length {length}")
                fh.seek(offset)
                data = fh.read() if length is None else fh.read(length)
        except OSError as e:
            raise OnnxImportError(f"onnx load: initializer {t.name!r}: cannot read external "
                                  f"data {path}: {e.strerror}") from None
        t.raw_data = data
        del t.external_data[:]
        t.data_location = 0
    return copy


def _max_opsets() -> dict:
    import onnx

    ml = max(row[3] for row in onnx.helper.VERSION_TABLE)
    return {"": onnx.defs.onnx_opset_version(), "ai.onnx.ml": ml}


def check_opsets(model) -> dict:
    """The model's opsets by domain, refused where a standard domain's version is unknown."""
    top = _max_opsets()
    opsets = {}
    for o in model.opset_import:
        domain = o.domain if o.domain != "ai.onnx" else ""
        if domain in top and not 1 <= o.version <= top[domain]:
            name = domain or "ai.onnx"
            raise OnnxImportError(
                f"onnx load: opset {o.version} of domain {name!r} is not a known version "
                f"(1 to {top[domain]} with onnx installed here)")
        if domain in opsets and opsets[domain] != o.version:
            raise OnnxImportError(f"onnx load: domain {domain or 'ai.onnx'!r} is imported twice, "
                                  f"at opsets {opsets[domain]} and {o.version}")
        opsets[domain] = o.version
    return opsets


def _node_name(node) -> str:
    return node.name or f"{node.op_type}({', '.join(node.output)})"


def _check_schema(node, opsets: dict) -> None:
    import onnx

    domain = node.domain if node.domain != "ai.onnx" else ""
    if domain not in _STANDARD or not onnx.defs.has(node.op_type, domain):
        return  # custom domains and unknown ops: the handler lookup reports them
    version = opsets.get(domain, opsets.get("", 21) if domain == "" else None)
    if version is None:
        raise OnnxImportError(f"node {_node_name(node)!r} ({node.op_type}): domain {domain!r} "
                              "is not in the model's opset_import")
    try:
        schema = onnx.defs.get_schema(node.op_type, version, domain)
    except onnx.defs.SchemaError:
        first = min(sc.since_version for sc in onnx.defs.get_all_schemas_with_history()
                    if sc.name == node.op_type and sc.domain == domain)
        raise OnnxImportError(
            f"node {_node_name(node)!r} ({node.op_type}): the op does not exist at opset "
            f"{version} of domain {domain or 'ai.onnx'!r} (it first appears at opset "
            f"{first})") from None
    A = onnx.AttributeProto
    for a in node.attribute:
        decl = schema.attributes.get(a.name)
        if decl is None or not a.type or a.ref_attr_name:
            continue
        want = int(decl.type)
        if want and a.type != want:
            raise OnnxImportError(
                f"node {_node_name(node)!r} ({node.op_type}): attribute {a.name!r} must be "
                f"{A.AttributeType.Name(want)}, got {A.AttributeType.Name(a.type)}")


def check_graph(graph, opsets: dict, outer: frozenset = frozenset(), where: str = "graph"):
    """Refuse a graph (and its subgraphs) that writes a value twice, reads a value nothing
    produced before the read, or uses an op or attribute its opset does not have."""
    import onnx

    A = onnx.AttributeProto
    defined: dict = {}
    for vi in graph.input:
        defined.setdefault(vi.name, "a graph input")
    for t in graph.initializer:
        if defined.get(t.name) == "an initializer":
            raise OnnxImportError(f"onnx load: {where}: initializer {t.name!r} is given twice")
        defined.setdefault(t.name, "an initializer")
    for t in graph.sparse_initializer:
        defined.setdefault(t.values.name, "an initializer")
    later = {o: node for node in graph.node for o in node.output if o}
    visible = set(outer) | set(defined)
    for node in graph.node:
        name = _node_name(node)
        for i in node.input:
            if i and i not in visible:
                if i in later:
                    raise OnnxImportError(
                        f"node {name!r} ({node.op_type}): input {i!r} is produced by a later "
                        f"node ({_node_name(later[i])!r}): the {where} is not topologically "
                        "sorted, or has a cycle")
                raise OnnxImportError(
                    f"node {name!r} ({node.op_type}): input {i!r} is not produced by any node, "
                    f"initializer or input of the {where}")
        _check_schema(node, opsets)
        for a in node.attribute:
            subs = [a.g] if a.type == A.GRAPH else list(a.graphs) if a.type == A.GRAPHS else []
            for g in subs:
                check_graph(g, opsets, frozenset(visible), f"subgraph {a.name!r} of node {name!r}")
        for o in node.output:
            if not o:
                continue
            if o in defined:
                raise OnnxImportError(
                    f"node {name!r} ({node.op_type}): output {o!r} is already {defined[o]}; "
                    "every value of an ONNX graph is assigned once")
            defined[o] = f"written by node {name!r}"
            visible.add(o)
