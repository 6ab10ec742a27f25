"""Example projections, referred to from specs as ``streamjoin.examples.functions:<name>``.

Joiners are called ``fn(key, left, right)``; selectors (group_by, value, key_selector, foreign_key)
``fn(key, value)``. They must be pure: the reference engine and the Spark engine both call them.
"""

from __future__ import annotations

from typing import Any


# --- seed 000: clicks per region --------------------------------------------------------------------
def region_or_unknown(key: Any, left: Any, right: Any) -> dict[str, Any]:
    """Joiner of clicks (left) with a user's region (right): an unknown user counts for ``"UNKNOWN"``."""
    return {"region": right if right is not None else "UNKNOWN", "clicks": left}


def region(key: Any, value: Any) -> Any:
    """group_by: the region of an enriched click."""
    return value["region"]


def clicks(key: Any, value: Any) -> Any:
    """value: the number of clicks of an enriched click."""
    return value["clicks"]


# --- seed 003: page views enriched with profiles -----------------------------------------------------
def page_with_region(key: Any, left: Any, right: Any) -> str:
    """Joiner of a page view (left) with the user's region (right): ``"/home,us-east"``; a missing
    profile (left join) gives ``"/home,<unknown>"`` as in the seed's leftJoin."""
    return f"{left},{right if right is not None else '<unknown>'}"


def view_user(key: Any, value: Any) -> Any:
    """key_selector: the user of a page view ``{"user": ..., "page": ...}`` (a non-key join)."""
    return value.get("user")


def page_length(key: Any, left: Any, right: Any) -> int:
    """Joiner returning a scalar: the length of the viewed page's path (for a ``long`` output)."""
    return len(left)


def page_of(key: Any, value: Any) -> Any:
    return value["page"]


def view_region(key: Any, left: Any, right: Any) -> dict[str, Any]:
    """Joiner of a page view ``{"user", "page"}`` with the user's region."""
    return {"user": left.get("user"), "page": left["page"], "region": right}


# --- foreign-key joins: orders -> products -----------------------------------------------------------
def order_product(key: Any, value: Any) -> Any:
    """foreign_key: the product an order ``{"product": ..., "qty": ...}`` points at (None: nowhere)."""
    return value.get("product")


def product_name_or_none(key: Any, value: Any) -> Any:
    """group_by after an order-product join: the product's name, or ``"none"`` without a product."""
    return value["right"] if value["right"] is not None else "none"


def order_qty(key: Any, value: Any) -> Any:
    """value: the quantity of the order of an order-product join result."""
    return value["left"]["qty"]


def one(key: Any, value: Any) -> int:
    return 1


# --- aggregates over the default joiner's {left, right} --------------------------------------------
def joined_right(key: Any, value: Any) -> Any:
    """group_by: the right side of a default-joiner result (None when the left row had no match)."""
    return value["right"]


def left_qty(key: Any, value: Any) -> Any:
    """value: the ``qty`` of the left side ``{"qty": ...}`` of a default-joiner result (may be None)."""
    return value["left"]["qty"]
