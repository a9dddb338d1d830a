"""Plan pointers of the PyTorch front end, keyed by everything the C cache keys on, so that a
repeated call skips building the ctypes key structs. Cleared with attntune.clear_plans()."""

from __future__ import annotations

import ctypes
from typing import Any

from . import _lib

_PLANS: dict[tuple[Any, ...], ctypes.c_void_p] = {}


def get(key: tuple[Any, ...], device: int, shape: _lib.Shape, layout: _lib.Layout, impl: str,
        db: str) -> ctypes.c_void_p:
    plan = _PLANS.get(key)
    if plan is None:
        plan = ctypes.c_void_p()
        _lib.check_py(_lib.py.atpy_plan_get(device, shape, layout, _lib.encode(impl), _lib.encode(db),
                                            ctypes.byref(plan)))
        _PLANS[key] = plan
    return plan


def forget() -> None:
    _PLANS.clear()
