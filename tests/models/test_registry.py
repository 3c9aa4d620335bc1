"""``core.registry.Registry``: the one lookup every extension point uses."""

from __future__ import annotations

import sys

import pytest

from dlbench.core.errors import UserError
from dlbench.core.registry import Registry


def test_names_keep_declaration_order_and_hide_test_doubles():
    r: Registry[int] = Registry("number")
    r.register("two", 2)
    r.register("one", 1)
    r.register("double", 0, hidden=True)
    assert r.names() == ("two", "one") and r.names(hidden=True) == ("two", "one", "double")
    assert r.get("double") == 0 and "double" in r and r.all() == [2, 1]


def test_an_unknown_name_is_one_line_naming_the_choices():
    r: Registry[int] = Registry("number")
    r.register("one", 1)
    with pytest.raises(UserError, match=r"^unknown number 'three'; choose from: one$"):
        r.get("three")


def test_a_lazy_entry_imports_its_module_only_when_asked_for():
    r: Registry[object] = Registry("module")
    sys.modules.pop("colorsys", None)
    r.register("colors", "colorsys:rgb_to_hsv")
    assert r.names() == ("colors",) and "colorsys" not in sys.modules
    assert r.get("colors")(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0) and "colorsys" in sys.modules


def test_a_name_declared_twice_is_a_bug_unless_replaced():
    r: Registry[int] = Registry("number")
    r.register("one", 1)
    with pytest.raises(ValueError, match="declared twice"):
        r.register("one", 11)
    r.register("one", 11, replace=True)
    assert r.get("one") == 11
    r.unregister("one")
    assert "one" not in r
