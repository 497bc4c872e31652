"""OpenAPI schemas of the MSD page's lookups (part of :mod:`api.openapi`), documented already
enveloped since they always are.
"""

from __future__ import annotations

_STR, _INT = {"type": "string"}, {"type": "integer"}


def stage_schemas() -> dict:
    """The schemas of the MSD page's lookups."""
    strs = {"type": "array", "items": _STR}
    return {
        "StationOptions": _always([{"type": "object", "required": ["name", "label", "order"],
                                    "properties": {"name": _STR, "label": _STR, "order": _INT}}], array=True),
        "LossReasons": _always({"type": "object", "required": ["loss_reasons"],
                                "properties": {"loss_reasons": strs}}),
        "FilterOptions": _always({"type": "object", "required": ["pj_types", "packages", "bops", "pj_functions"],
                                  "properties": {k: strs for k in ("pj_types", "packages", "bops",
                                                                   "pj_functions")}},
                                 {"updated_at": _STR, "schema_version": _INT}),
    }


def _always(data, extra_meta: dict | None = None, array: bool = False) -> dict:
    """An answer that is always the original's envelope (the /api/mid-section-defect/* routes)."""
    return {"type": "object", "required": ["success", "data", "meta"], "properties": {
        "success": {"const": True}, "data": {"type": "array", "items": data[0]} if array else data,
        "meta": {"type": "object", "required": ["timestamp", "app_version", *(extra_meta or {})],
                 "properties": {"timestamp": _STR, "app_version": _STR, **(extra_meta or {})}}}}
