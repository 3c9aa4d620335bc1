"""The rule machinery the per-framework modules share (no framework imported here).

A ``Rule`` says how one layer type's native arrays become canonical ones and
back.  The framework modules supply three small accessors (``read``, ``write``
and the layer enumeration); everything about matching, shape checks and error
messages lives here once, so the three frameworks cannot drift apart.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlbench.models.weights import WeightMismatch

Array = np.ndarray
Reader = Callable[[Any, str], "Array | None"]  # (layer, attribute) -> array, None if absent
Writer = Callable[[Any, str, Array], None]  # (layer, attribute, array)


def same(a: Array) -> Array:
    return a


def transpose(*axes: int) -> Callable[[Array], Array]:
    def convert(a: Array) -> Array:
        return np.ascontiguousarray(np.transpose(a, axes))

    convert.__name__ = f"transpose{axes}"
    return convert


@dataclass(frozen=True)
class Param:
    """One array: canonical suffix, native attribute path (dots allowed), conversions."""

    canonical: str
    native: str
    to_canonical: Callable[[Array], Array] = same
    to_native: Callable[[Array], Array] = same
    optional: bool = False  # absent in some configurations (a conv built without bias)


@dataclass(frozen=True)
class Rule:
    """How a layer type's weights map; either ``params`` or custom ``export``/``load``.

    Custom functions get the layer and (for ``load``) the dict suffix -> canonical
    array of every key whose longest matching layer name is this layer's; ``load``
    checks the shapes and raises ``WeightMismatch`` for a missing or surplus key.
    """

    params: tuple[Param, ...] = ()
    export: Callable[[Any], dict[str, Array]] | None = None
    load: Callable[[Any, dict[str, Array]], None] | None = None


def simple(*params: tuple) -> Rule:
    """A rule of one-to-one arrays: ``simple(("weight", "kernel", to_c, to_n), ...)``."""
    return Rule(params=tuple(p if isinstance(p, Param) else Param(*p) for p in params))


def rule_for(rules: dict[type, Rule], layer: Any) -> Rule | None:
    for cls in type(layer).__mro__:
        if cls in rules:
            return rules[cls]
    return None


def export_layers(layers: Iterable[tuple[str, Any, Rule]], read: Reader) -> OrderedDict[str, Array]:
    out: OrderedDict[str, Array] = OrderedDict()
    for name, layer, rule in layers:
        if rule.export is not None:
            arrays = rule.export(layer)
        else:
            arrays = {}
            for p in rule.params:
                value = read(layer, p.native)
                if value is None:
                    if p.optional:
                        continue
                    raise WeightMismatch(f"layer {name!r} ({type(layer).__name__}) has no {p.native!r}")
                arrays[p.canonical] = p.to_canonical(value)
        for suffix, value in arrays.items():
            out[f"{name}.{suffix}"] = np.array(value, dtype=np.float32)  # a copy, never a view
    return out


def check_shape(name: str, suffix: str, got: tuple, want: tuple) -> None:
    if tuple(got) != tuple(want):
        raise WeightMismatch(f"{name}.{suffix}: shape {tuple(got)} does not fit the layer's {tuple(want)}")


def _owners(names: list[str], keys: Iterable[str]) -> dict[str, list[str]]:
    """Each key goes to the layer whose name is its longest dotted prefix."""
    by_layer: dict[str, list[str]] = {n: [] for n in names}
    for key in keys:
        parts = key.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            owner = ".".join(parts[:cut])
            if owner in by_layer:
                by_layer[owner].append(key)
                break
    return by_layer


def import_layers(
    layers: Iterable[tuple[str, Any, Rule]],
    weights: dict[str, Array],
    read: Reader,
    write: Writer,
    framework: str,
) -> None:
    """Fill every layer from ``weights``; every array must be used exactly once.

    Nothing is written until every name and shape has matched, so a mismatch
    leaves the network as it was (custom ``load`` rules run last and check
    their own shapes).
    """
    layers = list(layers)
    names = [name for name, _, _ in layers]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise WeightMismatch(
            f"{framework} network has several weighted layers named {dupes[0]!r}; layer names must be unique"
        )
    owners = _owners(names, weights)
    used: set[str] = set()
    missing: list[str] = []
    writes: list[tuple[Any, str, Array]] = []
    custom: list[tuple[Rule, Any, dict[str, Array]]] = []
    for name, layer, rule in layers:
        mine = {k[len(name) + 1 :]: weights[k] for k in owners[name]}
        if rule.load is not None:
            custom.append((rule, layer, mine))
            used.update(owners[name])
            continue
        for p in rule.params:
            current = read(layer, p.native)
            if current is None:
                if p.optional:
                    continue
                raise WeightMismatch(f"layer {name!r} ({type(layer).__name__}) has no {p.native!r}")
            if p.canonical not in mine:
                missing.append(f"{name}.{p.canonical}")
                continue
            value = p.to_native(np.asarray(mine[p.canonical], dtype=np.float32))
            check_shape(name, p.canonical, value.shape, current.shape)
            writes.append((layer, p.native, value))
            used.add(f"{name}.{p.canonical}")
    if missing:
        raise WeightMismatch(
            f"{len(missing)} {framework} weights have no canonical array, e.g. {', '.join(missing[:3])}"
        )
    left = [k for k in weights if k not in used]
    if left:
        raise WeightMismatch(
            f"{len(left)} canonical arrays match no {framework} weight, e.g. {', '.join(left[:3])}"
        )
    for layer, attr, value in writes:
        write(layer, attr, value)
    for rule, layer, mine in custom:
        rule.load(layer, mine)


def ruled_layers(
    named: Iterator[tuple[str, Any]],
    rules: dict[type, Rule],
    own_weights: Callable[[Any], int],
    framework: str,
):
    """The (name, layer, rule) of every layer with a rule, skipping the insides of
    ruled layers; a layer holding weights of its own without a rule is an error."""
    inside: list[str] = []
    for name, layer in named:
        if any(name == p or name.startswith(p + ".") for p in inside):
            continue
        rule = rule_for(rules, layer)
        if rule is not None:
            inside.append(name)
            yield name, layer, rule
        elif own_weights(layer):
            raise WeightMismatch(
                f"no {framework} weight rule for layer {name!r} of type "
                f"{type(layer).__name__}; add one to "
                f"models/weights/{framework}.py RULES"
            )
