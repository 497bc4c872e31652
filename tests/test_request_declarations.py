"""Each request declared once (tracebus.jobs.fields): its checks and its OpenAPI schema agree."""

from __future__ import annotations

import jsonschema
import pytest

from tracebus.errors import InvalidParams
from tracebus.jobs.list_fields import Strings
from tracebus.jobs.shapes import DateSpan, Shape
from tracebus.trace.errors import CidLimitExceeded, InvalidProfile
from tracebus.trace.request import EVENTS_REQUEST
from tracebus.trace.domains import MAX_RANGE_DAYS
from tracebus.trace.msd.params import EVENTS_DATES
from tracebus.trace.stages.params import LINEAGE_REQUEST, SEED_DATES, SEED_REQUEST

LIMITS = {"cid_limit": 3}

EVENTS = [
    {"profile": "query_tool", "container_ids": ["a", " b ", "a"], "domains": ["history"]},
    {"profile": "query_tool", "container_ids": ["a"], "domains": ["history"], "params": None,
     "lineage_query_id": None},
    {"profile": "mid_section_defect", "container_ids": ["a"], "domains": ["upstream_history"],
     "params": {"station": "測試"}, "lineage_query_id": "lin-1"},
    # refused by the schema and by the check alike
    {"profile": "query_tool", "container_ids": [], "domains": ["history"]},
    {"profile": "query_tool", "container_ids": ["a", "b", "c", "d"], "domains": ["history"]},
    {"profile": "query_tool", "container_ids": ["x" * 65], "domains": ["history"]},
    {"profile": "query_tool", "container_ids": [1], "domains": ["history"]},
    {"profile": "query_tool", "container_ids": "a", "domains": ["history"]},
    {"profile": "", "container_ids": ["a"], "domains": ["history"]},
    {"profile": "query_tool", "container_ids": ["a"], "domains": []},
    {"profile": "query_tool", "container_ids": ["a"]},
    {"container_ids": ["a"], "domains": ["history"]},
    {"profile": "query_tool", "container_ids": ["a"], "domains": ["history"], "params": []},
    {"profile": "query_tool", "container_ids": ["a"], "domains": ["history"], "lineage_query_id": 5},
    ["not", "an", "object"],
]
LINEAGE = [
    {"profile": "mid_section_defect", "container_ids": ["a", "b"]},
    {"profile": "query_tool", "container_ids": ["a"], "params": {"direction": ""}, "cache_key": 1},
    {"profile": "query_tool_reverse", "container_ids": ["a"], "params": None},
    {"profile": "nope", "container_ids": ["a"]},
    {"profile": "query_tool", "container_ids": []},
    {"profile": "query_tool", "container_ids": ["a", "b", "c", "d"]},
    {"profile": "query_tool", "container_ids": ["y" * 65]},
    {"profile": "query_tool", "container_ids": ["a"], "params": 3},
    {"profile": "query_tool"},
]


def _checks(shape: Shape, body) -> bool:
    try:
        shape.check(body, LIMITS)
    except InvalidParams:
        return False
    except CidLimitExceeded:
        return False
    return True


@pytest.mark.parametrize(("shape", "bodies"), [(EVENTS_REQUEST, EVENTS), (LINEAGE_REQUEST, LINEAGE)],
                         ids=["events", "lineage"])
def test_what_the_check_accepts_is_what_the_schema_allows(shape, bodies):
    schema = shape.schema(LIMITS)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    verdicts = [(_checks(shape, body), validator.is_valid(body)) for body in bodies]
    assert [check for check, _ in verdicts] == [allowed for _, allowed in verdicts], list(zip(bodies, verdicts))
    # both sides are exercised
    assert {check for check, _ in verdicts} == {True, False}


def test_the_declared_messages_and_errors():
    with pytest.raises(CidLimitExceeded, match=r"^container_ids count \(4\) exceeds limit \(3\)$") as e:
        EVENTS_REQUEST.check({"profile": "p", "container_ids": list("abcd"), "domains": ["d"]}, LIMITS)
    assert e.value.details == {"cid_count": 4, "limit": 3}
    with pytest.raises(InvalidParams, match=r"^container id longer than 64 characters: 'xxx"):
        EVENTS_REQUEST.check({"profile": "p", "container_ids": ["x" * 90], "domains": ["d"]}, LIMITS)
    with pytest.raises(InvalidParams, match=r"^container_ids is required$"):
        EVENTS_REQUEST.check({"profile": "p", "domains": ["d"]})
    with pytest.raises(InvalidProfile, match=r"^unknown profile 'nope'; known: query_tool, "):
        LINEAGE_REQUEST.check({"profile": "nope", "container_ids": ["a"]})
    with pytest.raises(InvalidParams, match=r"^container_ids must be a list of strings, got str$"):
        LINEAGE_REQUEST.check({"profile": "query_tool", "container_ids": "a"})
    with pytest.raises(InvalidProfile, match=r"^seed-resolve serves profile 'mid_section_defect' only; got None$"):
        SEED_REQUEST.check({"params": {}})
    with pytest.raises(InvalidParams, match=r"^params must be an object, got list$"):
        SEED_REQUEST.check({"profile": "mid_section_defect", "params": []})
    # non-strings are skipped by the stage requests, refused by the events request
    assert LINEAGE_REQUEST.check({"profile": "query_tool", "container_ids": [1, " a ", "a", ""]},
                                 LIMITS)["container_ids"] == ["a"]


def test_one_date_limit_for_the_msd_seed_stage_and_events_job():
    """The original applies one MAX_QUERY_DAYS (730) to both (its _validate_date_range)."""
    assert MAX_RANGE_DAYS == 730 and SEED_DATES.max_days == EVENTS_DATES.max_days == MAX_RANGE_DAYS
    assert SEED_DATES.check({"start_date": "2023-01-01", "end_date": "2024-12-31"}) == ("2023-01-01", "2024-12-31")
    assert SEED_DATES.check({"date_range": [" 2024-01-01", "2024-01-02"], "start_date": "x"}) == (
        "2024-01-01", "2024-01-02")
    with pytest.raises(InvalidParams, match=r"^the date range 2023-01-01 \.\. 2025-01-02 spans 732 days; at most 730"):
        SEED_DATES.check({"start_date": "2023-01-01", "end_date": "2025-01-02"})
    with pytest.raises(InvalidParams, match=r"^date range is 732 days; at most 730 allowed$"):
        EVENTS_DATES.check_span("2023-01-01", "2025-01-02")
    with pytest.raises(InvalidParams, match=r"^start_date and end_date must be YYYY-MM-DD, got None and '2025-01-02'$"):
        EVENTS_DATES.check_span(None, "2025-01-02")
    with pytest.raises(InvalidParams, match=r"^start_date 2025-01-03 is after end_date 2025-01-02$"):
        SEED_DATES.check({"start_date": "2025-01-03", "end_date": "2025-01-02"})
    with pytest.raises(InvalidParams, match=r"^start_date and end_date \(or date_range\) are required"):
        SEED_DATES.check({"start_date": "2025-01-03"})


def test_a_field_schema_follows_its_declaration():
    field = Strings("ids", empty="none", max_length=8, max_items="cap")
    # an item that is not a string is skipped (no not_string): the pattern applies to strings only
    assert field.schema({"cap": 5}) == {"type": "array", "minItems": 1, "maxItems": 5, "items": {
        "pattern": r"^\s*(?:\S(?:[\s\S]{0,6}\S)?)?\s*$"},
        "contains": {"type": "string", "pattern": r"\S"}}
    # a list checked only in some cases (another field's value) states its type alone
    assert Strings("v", empty="none", max_length=8, conditional=True).schema({}) == {
        "type": "array", "items": {"type": "string"}}
    assert DateSpan(10).properties()["start_date"]["description"].endswith("at most 10 days from start to end")


@pytest.mark.parametrize("not_string", ["{name} must contain only strings", None])
def test_a_list_schema_accepts_what_its_check_accepts(not_string):
    """A blank item among valid ones is dropped by the check, so the schema allows it; an item
    is stripped before its length is checked; without ``not_string`` other items are skipped."""
    field = Strings("ids", not_string=not_string, empty="none", max_length=3, max_items="cap")
    validator = jsonschema.Draft202012Validator(field.schema({"cap": 2}))
    for value in (["a"], ["a", ""], [" ", "abc"], ["  abc\t"], ["a", "\u3000"], ["a", "b"], ["a\nb"],
                  [], [""], [" ", "\n"], ["abcd"], [" abcd "], ["a", "b", "c"], ["a", 1], [1]):
        try:
            field.check(value, {"cap": 2})
            accepted = True
        except InvalidParams:
            accepted = False
        assert validator.is_valid(value) == accepted, value


def test_a_query_kind_schema_follows_its_params():
    from tracebus.trace.query.equipment import EQUIPMENT_PERIOD

    schema = EQUIPMENT_PERIOD.schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    base = {"start_date": "2025-01-01", "end_date": "2025-01-05", "query_type": "lots", "equipment_ids": ["E1"]}
    accepted = [base, {**base, "page": 2, "per_page": 50, "container_names": []},
                {**base, "query_type": "materials", "equipment_names": ["N1"]}]
    for body in accepted:
        EQUIPMENT_PERIOD.check(body)
        assert validator.is_valid(body), body
    for body in ({**base, "query_type": "nope"}, {**base, "equipment_ids": [1]},
                 {k: v for k, v in base.items() if k != "start_date"}, {**base, "equipment_ids": ["E"] * 20_001}):
        assert not validator.is_valid(body), body
        with pytest.raises(InvalidParams):
            EQUIPMENT_PERIOD.check(body)
    assert set(schema["properties"]) == {p.name for p in EQUIPMENT_PERIOD.params}
    assert f"at most {EQUIPMENT_PERIOD.max_days} days" in schema["properties"]["end_date"]["description"]


def test_msd_seeds_are_checked_and_capped_as_the_events_cids():
    from tracebus.trace.msd.job import plan

    body = {"profile": "mid_section_defect", "container_ids": ["a"], "domains": ["upstream_history"],
            "params": {}}
    assert plan.parse({**body, "seed_container_ids": [" s1", "s2", "s1"]}, ["upstream_history"], "u",
                      LIMITS).seeds == ["s1", "s2"]
    assert plan.parse(body, ["upstream_history"], "u", LIMITS).seeds == ["a"]  # else container_ids
    with pytest.raises(CidLimitExceeded, match=r"^seed_container_ids count \(4\) exceeds limit \(3\)$"):
        plan.parse({**body, "seed_container_ids": list("abcd")}, ["upstream_history"], "u", LIMITS)
    with pytest.raises(InvalidParams, match=r"^seed_container_ids must be a list of strings$"):
        plan.parse({**body, "seed_container_ids": "abc"}, ["upstream_history"], "u", LIMITS)
    with pytest.raises(InvalidParams, match=r"^container id longer than 64 characters"):
        plan.parse({**body, "seed_container_ids": ["z" * 65]}, ["upstream_history"], "u", LIMITS)


def test_a_message_echoes_at_most_80_characters_of_a_value():
    from tracebus.trace.stages.params import SEED_PARAMS

    with pytest.raises(InvalidParams) as e:
        SEED_PARAMS.value({"mode": "m" * 10_000}, "mode")
    assert e.value.message == f"mode must be one of date_range, container, not {'m' * 80!r}"


def test_the_api_only_bodies_are_checked_as_their_schemas_say():
    """The abandon body and the submit body of /api/v1/jobs (declared in api/): their checks
    and their OpenAPI schemas answer alike, with the messages the routes always gave."""
    from api.resources.generic import ABANDON_REQUEST
    from api.resources.v1 import submit_request

    cases = [(ABANDON_REQUEST, {}, None), (ABANDON_REQUEST, {"prefix": None}, None),
             (ABANDON_REQUEST, {"prefix": ""}, None), (ABANDON_REQUEST, {"prefix": "trace-evt"}, None),
             (ABANDON_REQUEST, {"prefix": "x" * 64}, None),
             (ABANDON_REQUEST, {"prefix": "x" * 65}, "^prefix must be a string of at most 64 characters$"),
             (ABANDON_REQUEST, {"prefix": 3}, "^prefix must be a string of at most 64 characters$"),
             (ABANDON_REQUEST, [], r'^request body must be a JSON object: \{\} or \{"prefix": "<job kind>"\}$'),
             (submit_request(), {"kind": "query-tool", "params": {}}, None),
             (submit_request(), {"kind": "nope", "params": {}}, "^kind must be one of "),
             (submit_request(), {"params": {}}, "^kind must be one of "),
             (submit_request(), "x", r'^request body must be a JSON object \{"kind", "params"\}$')]
    for shape, body, refused in cases:
        valid = jsonschema.Draft202012Validator(shape.schema()).is_valid(body)
        if refused is None:
            assert valid, body
            shape.check(body)
        else:
            with pytest.raises(InvalidParams, match=refused):
                shape.check(body)
            assert not valid, body
    assert "query-tool" in submit_request()["kind"].choices


def test_a_flag_and_a_token_list_check_as_declared():
    from tracebus.jobs.fields import Flag
    from tracebus.jobs.list_fields import Tokens

    flag = Flag("all")
    assert flag.check(True, {}) is True and flag.check(False, {}) is False
    for value in (1, 0, "true", None):
        with pytest.raises(InvalidParams, match="^all must be true or false$"):
            flag.check(value, {})
    ids = Tokens("ids", pattern=r"^[0-9]{1,3}-[0-9]$", max_items=2, invalid="{name}: 1 to {max} ids")
    validator = jsonschema.Draft202012Validator(ids.schema({}))
    assert ids.check(["1-0", "1-0"], {}) == ["1-0"] and validator.is_valid(["1-0", "1-0"])
    for value in ([], ["1-0", "2-0", "3-0"], ["1-0\n"], [" 1-0"], ["\u0661-\u0660"], ["1234-0"], [1], "1-0"):
        with pytest.raises(InvalidParams, match=r"^ids: 1 to 2 ids$"):
            ids.check(value, {})
        assert not validator.is_valid(value), value
