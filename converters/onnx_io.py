"""Reading, checking, normalizing and writing ONNX files.

Every hop that reads or writes ONNX goes through here, so a bad file is
refused the same way everywhere: missing, empty, a text file, a truncated or
corrupt protobuf, a graph the checker rejects, an operator no runtime knows —
each is one ``ConversionError`` (a ``UserError``) line naming the file and the reason.

The exporters disagree on names and on the batch dimension (MindSpore ignores
``dynamic_axes``; tf2onnx calls the batch ``unk__401``), so ``normalize_io`` makes every
exported file look the same: one input ``input`` (NCHW float32 images, or token ids), or
the spec's names for several inputs, one output ``logits``, batch dimension ``batch`` and,
for token inputs left dynamic, sequence dimension ``sequence``.  The IR version the
installed ONNX Runtime reads is ``onnx_ir``'s.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from dlbench.converters.base import ConversionError
from dlbench.core.errors import first_line

INPUT_NAME = "input"
OUTPUT_NAME = "logits"
BATCH_DIM = "batch"
# Dimension 1 of integer (token) inputs, where the exporter leaves it dynamic.
SEQUENCE_DIM = "sequence"
# Keys dlbench writes into an ONNX file's metadata_props (they change nothing it computes).
META_PREFIX = "dlbench."


def onnx():
    """The onnx module, or a ConversionError saying how to install it."""
    try:
        import onnx as mod
    except ImportError:
        raise ConversionError("onnx is not installed: pip install 'dlbench[onnx]'") from None
    return mod


def ort():
    try:
        import onnxruntime as mod
    except ImportError:
        raise ConversionError("onnxruntime is not installed: pip install 'dlbench[onnx]'") from None
    return mod


def sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _looks_like_text(head: bytes) -> bool:
    """A serialized ModelProto is binary; a text file is printable UTF-8 without NULs."""
    if not head or b"\x00" in head:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    printable = sum(ch.isprintable() or ch in "\r\n\t" for ch in text)
    return printable >= 0.95 * len(text)


def check_readable(path: str | os.PathLike, what: str = "ONNX model") -> Path:
    """The file exists, is a file, is not empty and is not a text file."""
    path = Path(path)
    if not path.exists():
        raise ConversionError(f"{path}: no such file")
    if path.is_dir():
        raise ConversionError(f"{path}: is a directory, not an {what}")
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        raise ConversionError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if not head:
        raise ConversionError(f"{path}: the file is empty, not an {what}")
    if _looks_like_text(head):
        raise ConversionError(f"{path}: is a text file, not an {what} (a binary protobuf)")
    return path


def load(path: str | os.PathLike, *, check: bool = True, label: str | os.PathLike | None = None):
    """Load and (by default) check an ONNX file; every failure is one ConversionError line.

    ``label`` is the name errors use (a staged file's final name).
    """
    name = label or path
    path = check_readable(path)
    onnx_mod = onnx()
    try:
        model = onnx_mod.load(str(path))
    except Exception as exc:  # noqa: BLE001 - protobuf raises DecodeError, RuntimeError, ...
        raise ConversionError(
            f"{name}: not a readable ONNX model, the file is corrupt or truncated ({first_line(exc)})"
        ) from None
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise ConversionError(f"{name}: not an ONNX model (no graph in it; corrupt or truncated?)")
    if not model.graph.output:
        raise ConversionError(f"{name}: its graph declares no outputs, so running it computes nothing")
    # Engines accept a name listed twice, but every command keys inputs and outputs by name:
    # refused here, where bench, build and verify all load, so all three say the same.
    for what, values in (("input", model.graph.input), ("output", model.graph.output)):
        seen: set[str] = set()
        for v in values:
            if v.name in seen:
                raise ConversionError(f"{name}: its graph lists {what} {v.name!r} twice; name each once")
            seen.add(v.name)
    if check:
        check_model(model, name)
    return model


def _subgraph_inputs(node) -> set[str]:
    """Outer-scope names a node's subgraphs (If/Loop/Scan bodies) read."""
    names: set[str] = set()
    for attr in node.attribute:
        graphs = ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
        for g in graphs:
            local = {i.name for i in g.input} | {t.name for t in g.initializer}
            for n in g.node:
                local.update(n.output)
            for n in g.node:
                names.update(i for i in n.input if i and i not in local)
                names.update(_subgraph_inputs(n) - local)
    return names


def toposort(model) -> None:
    """Sort ``model.graph.node`` so every node follows its producers (Kahn's algorithm).

    Some converters append the nodes they insert (float16 casts) at the end;
    ONNX Runtime sorts on load, but the checker rightly refuses such a graph.
    """
    g = model.graph
    nodes = list(g.node)
    producer = {out: i for i, n in enumerate(nodes) for out in n.output if out}
    deps = []
    for n in nodes:
        wanted = {i for i in n.input if i} | _subgraph_inputs(n)
        deps.append({producer[i] for i in wanted if i in producer})
    users: dict[int, list[int]] = {i: [] for i in range(len(nodes))}
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    remaining = [len(d) for d in deps]
    ready = [i for i, r in enumerate(remaining) if r == 0]
    order = []
    while ready:
        i = ready.pop(0)
        order.append(i)
        for u in users[i]:
            remaining[u] -= 1
            if remaining[u] == 0:
                ready.append(u)
    if len(order) != len(nodes):
        raise ConversionError("the graph has a cycle; it is not a valid ONNX model")
    del g.node[:]
    g.node.extend(nodes[i] for i in order)


def check_model(model, path: str | os.PathLike, full: bool = True) -> None:
    """``onnx.checker`` with strict shape inference (``full``: a file dlbench writes or
    verifies), or its structural checks alone (a file only benchmarked: ONNX Runtime runs
    graphs whose shapes strict inference disputes), errors turned into one line."""
    onnx_mod = onnx()
    try:
        onnx_mod.checker.check_model(model, full_check=full)
    except Exception as exc:  # noqa: BLE001 - ValidationError, InferenceError
        msg = first_line(exc)
        unknown = re.search(r"No (?:Op|Schema) registered for (\w+) with domain_version of (\d+)", str(exc))
        if unknown:
            raise ConversionError(
                f"{path}: uses operator {unknown.group(1)}, which no ONNX opset "
                f"defines (opset {unknown.group(2)}): no runtime can run it"
            ) from None
        raise ConversionError(f"{path}: not a valid ONNX model ({msg})") from None


def input_names(spec) -> list[str]:
    """What an exported file's inputs are called: ``input`` for a one-input model (the
    convention every image export follows), the spec's names for several (token
    models: ``input_ids``, ``token_type_ids``, ``attention_mask``)."""
    return [INPUT_NAME] if len(spec.inputs) == 1 else [i.name for i in spec.inputs]


def normalize_io(
    model, *, input_name: str = INPUT_NAME, output_name: str = OUTPUT_NAME, dynamic_batch: bool = True
) -> dict[str, str]:
    """Inputs and the one output renamed, with a named (or fixed) batch dimension.

    A one-input model's input becomes ``input_name``; several inputs keep the
    names the exporter was given (the spec's).  A dynamic dimension 1 of an
    integer input (token ids) is named ``sequence`` whatever the exporter
    called it.  Returns the renames applied.  Stale intermediate shapes are
    dropped and inferred again by the caller (``infer_shapes``), since a batch
    that was fixed in the exporter's trace may be baked into them.
    """
    onnx_mod = onnx()
    g = model.graph
    inits = {t.name for t in g.initializer}
    inputs = [i for i in g.input if i.name not in inits]
    if not inputs or len(g.output) != 1:
        raise ConversionError(
            f"expected inputs and one output, the exporter wrote "
            f"{len(inputs)} inputs and {len(g.output)} outputs"
        )
    renames = {}
    pairs = [(g.output[0], output_name)] + ([(inputs[0], input_name)] if len(inputs) == 1 else [])
    for vi, new in pairs:
        old = vi.name
        if old != new:
            renames[old] = new
            vi.name = new
    for node in g.node:
        node.input[:] = [renames.get(n, n) for n in node.input]
        node.output[:] = [renames.get(n, n) for n in node.output]
    ints = (onnx_mod.TensorProto.INT32, onnx_mod.TensorProto.INT64)
    for vi in (*inputs, g.output[0]):
        dims = vi.type.tensor_type.shape.dim
        if len(dims):
            if dynamic_batch:
                dims[0].Clear()
                dims[0].dim_param = BATCH_DIM
            elif not dims[0].HasField("dim_value"):
                raise ConversionError(
                    f"{vi.name}: static batch asked, but the exporter left the batch dimension symbolic"
                )
        if (
            vi is not g.output[0]
            and vi.type.tensor_type.elem_type in ints
            and len(dims) >= 2
            and not dims[1].HasField("dim_value")
        ):
            dims[1].Clear()
            dims[1].dim_param = SEQUENCE_DIM
    del g.value_info[:]
    return renames


def infer_shapes(model, path: str | os.PathLike = "model"):
    onnx_mod = onnx()
    try:
        return onnx_mod.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except Exception as exc:  # noqa: BLE001 - onnx raises several types; all mean a bad graph
        raise ConversionError(f"{path}: shape inference fails ({first_line(exc)})") from None


def set_metadata(model, meta: dict[str, Any]) -> None:
    """Write ``dlbench.*`` metadata_props (replacing earlier values of the same keys)."""
    keep = [p for p in model.metadata_props if not any(p.key == META_PREFIX + k for k in meta)]
    del model.metadata_props[:]
    model.metadata_props.extend(keep)
    for key, value in meta.items():
        if value is None:
            continue
        prop = model.metadata_props.add()
        prop.key, prop.value = META_PREFIX + key, str(value)


def metadata(model) -> dict[str, str]:
    return {p.key[len(META_PREFIX) :]: p.value for p in model.metadata_props if p.key.startswith(META_PREFIX)}


def publish_mode(path: str | os.PathLike) -> None:
    """Give a finished artifact the permissions a normally created file gets.

    Temporary files are created 0600 and MindSpore writes its files 0400; an
    artifact is meant to be read by whoever benchmarks it.
    """
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)


def save(model, path: str | os.PathLike) -> Path:
    """Write atomically (temp file, then rename): a crash never leaves half a model."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        onnx().save(model, tmp)
        publish_mode(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def session(path: str | os.PathLike, *, threads: int | None = None):
    """An ONNX Runtime CPU session; a graph it cannot run is one ConversionError line.

    Logging is kept to errors: ORT warns on every run when an exporter wrote a
    fixed output shape that a dynamic batch overrides.
    """
    rt = ort()
    opts = rt.SessionOptions()
    opts.log_severity_level = 3
    if threads:
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
    try:
        sess = rt.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - Fail, InvalidGraph, NotImplemented, ...
        text = str(exc)
        op = (
            re.search(r"Could not find an implementation for (\S+?)\(\d+\)", text)
            or re.search(r"(\S+) is not a registered function/op", text)
            or re.search(r"No opset import for domain '([^']+)'", text)
        )
        if op:
            name = re.sub(r"\(-?\d+\)$", "", op.group(1))
            raise ConversionError(
                f"{path}: operator {name} has no implementation in "
                f"onnxruntime {rt.__version__} (CPU): no runtime here can run it"
            ) from None
        ir = re.search(r"Unsupported model IR version: (\d+), max supported IR version: (\d+)", text)
        if ir:
            raise ConversionError(
                f"{path}: has ONNX IR version {ir.group(1)}, and onnxruntime "
                f"{rt.__version__} reads at most {ir.group(2)} (onnx >= 1.23 writes 14 "
                f"by default): re-save it with ir_version {ir.group(2)} or lower"
            ) from None
        said = text.split(":", 3)[-1].strip() if "ONNXRuntimeError" in text else first_line(exc)
        raise ConversionError(
            f"{path}: onnxruntime {rt.__version__} cannot load it ({said.splitlines()[0][:300]})"
        ) from None
    if "CPUExecutionProvider" not in sess.get_providers():
        raise ConversionError(f"{path}: onnxruntime ran it on {sess.get_providers()}, not the CPU")
    return sess
