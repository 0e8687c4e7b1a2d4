"""Property-based: hundreds of mutated seed specs (hostile values anywhere, broken YAML, other encodings)
each end in exit 0, 1 or 2 with a message, never a traceback, write nothing outside charts/ and leave
charts/ either as it was or exactly as the specs render. The fuzz benchmark runs the same cases with a
random seed (`make bench`)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings

from fuzzing import encode, mutated_data, mutated_text, run_case

# Derandomized so CI is reproducible; `make bench` explores with fresh seeds.
FUZZ = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FUZZ
@given(case=mutated_data())
def test_mutated_values_end_in_a_message(tmp_path_factory: object, case: tuple[str, object]) -> None:
    name, data = case
    run_case(name, encode(data), Path(tmp_path_factory.mktemp("fuzz")))  # type: ignore[attr-defined]


@FUZZ
@given(case=mutated_text())
def test_mutated_yaml_ends_in_a_message(tmp_path_factory: object, case: tuple[str, bytes]) -> None:
    name, text = case
    run_case(name, text, Path(tmp_path_factory.mktemp("fuzz")))  # type: ignore[attr-defined]
