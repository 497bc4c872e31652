"""schemathesis hooks of tests/test_api_schemathesis.py, loaded by its CLI through
``SCHEMATHESIS_HOOKS``.

The test's config fixes two parameters (``[parameters]``: the path's ``job_id`` and the user
header), and schemathesis applies that override after its coverage phase built each case: a
case built as a variation of a fixed parameter (too long, off-pattern, wrong type, at its
boundary...) is sent with the fixed value instead, i.e. as the very request, with the very
checks, that the operation's unvaried case already sends (236 of the 1,817 requests were such
repeats). :func:`filter_case` drops those before they are sent; the fixed parameters
themselves are fuzzed by tests/test_api_path_ids.py and tests/test_api_contracts.py.
"""

from __future__ import annotations

import os

import schemathesis
from schemathesis.generation.meta import CoveragePhaseData

#: ``location:name`` of the fixed parameters, comma-separated (set by the test).
ENV = "TRACEBUS_SCHEMATHESIS_FIXED"
FIXED = {(location, name.lower()) for location, _, name in
         (item.partition(":") for item in os.environ.get(ENV, "").split(",") if item)}


@schemathesis.hook
def filter_case(context, case) -> bool:
    meta = case.meta
    data = meta.phase.data if meta is not None else None
    if not isinstance(data, CoveragePhaseData) or data.parameter is None or data.parameter_location is None:
        return True
    return (data.parameter_location.value, data.parameter.lower()) not in FIXED
