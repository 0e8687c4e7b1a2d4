"""The building blocks of spec models, shared by the app spec and every engine's model: the strict base
model and the constrained value types (bounded texts, names, images, quantities, versions)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import semver
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints
from pydantic_core import PydanticCustomError

from olarespack.core import quantity
from olarespack.core.hardware import profiles

# Bounds on what a spec may ask for: far above any real app, low enough that no arithmetic on them
# overflows or takes long (contexts of 16M tokens, 2**63-byte quantities).
MAX_TOKENS = 2**24
MAX_ITEMS = 64


def _semver(text: str) -> str:
    try:
        semver.Version.parse(text)
    except ValueError:
        raise PydanticCustomError(
            "semver", "{text!r} is not a SemVer 2 version like 1.0.5 (no leading 'v')", {"text": text}
        ) from None
    return text


def _quantity(parse: Callable[[str], int], example: str, numbers_too: bool) -> Callable[[object], str]:
    """A validator keeping the spec's own spelling of a quantity once Kubernetes would accept it."""

    def check(value: object) -> str:
        if numbers_too and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise PydanticCustomError("quantity", "write a quantity like {example}", {"example": example})
        try:
            parse(value)
        except ValueError as exc:
            raise PydanticCustomError("quantity", str(exc)) from None
        return value

    return check


def _hardware(text: str) -> str:
    if text not in profiles():
        raise PydanticCustomError(
            "hardware-profile",
            "unknown hardware profile {text!r}; known: {known}",
            {"text": text, "known": ", ".join(sorted(profiles()))},
        )
    return text


SemVer = Annotated[str, StringConstraints(max_length=128), AfterValidator(_semver)]
# Spec text is bounded per field; control characters, {{ }} and token shapes are refused for every string
# by textguard before the models see the data.
Text = Annotated[str, StringConstraints(min_length=1, max_length=256)]
Description = Annotated[str, StringConstraints(min_length=1, max_length=2_000)]
LongText = Annotated[str, StringConstraints(min_length=1, max_length=50_000)]
Note = Annotated[str, StringConstraints(min_length=1, max_length=20_000)]
ArgText = Annotated[str, StringConstraints(max_length=4_096)]
Title = Annotated[str, StringConstraints(min_length=1, max_length=30)]
EntranceTitle = Annotated[str, StringConstraints(min_length=1, max_length=30, pattern=r"^[a-zA-Z0-9 -]+$")]
Url = Annotated[str, StringConstraints(max_length=2_048, pattern=r"^https?://[\x21-\x7e]+$")]  # printable ASCII
HardwareName = Annotated[str, AfterValidator(_hardware)]
HfRepo = Annotated[
    str, StringConstraints(max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
]
_IMAGE_PATTERN = r"^[a-z0-9]([a-z0-9._/-]*[a-z0-9])?(:[A-Za-z0-9._-]+)?(@sha256:[0-9a-f]{64})?$"
Image = Annotated[str, StringConstraints(max_length=512, pattern=_IMAGE_PATTERN)]
EnvName = Annotated[str, StringConstraints(max_length=128, pattern=r"^[A-Z_][A-Z0-9_]*$")]
Revision = Annotated[str, StringConstraints(max_length=128, pattern=r"^[A-Za-z0-9._/-]+$")]
Tokens = Annotated[int, Field(gt=0, le=MAX_TOKENS)]
# A folder inside the app's model storage (the hostPath mounted at /models).
# Model files live in the app's storage (/models) or the box's shared model folder (/shared-models: Olares'
# sharedlib ai/model, which several apps read, as the seed author's v3 charts keep their GGUF files)
SHARED_MODEL_DIR = "/shared-models"
ModelPath = Annotated[
    str, StringConstraints(max_length=256, pattern=r"^/(models|shared-models)(/[A-Za-z0-9][A-Za-z0-9._-]*)*$")
]
LocaleName = Annotated[str, StringConstraints(pattern=r"^[a-z]{2}-[A-Z]{2}$")]
CpuQuantity = Annotated[str, BeforeValidator(_quantity(quantity.parse_cpu, "4, 0.5 or 1500m", numbers_too=True))]
ByteQuantity = Annotated[str, BeforeValidator(_quantity(quantity.parse_bytes, "512Mi or 24Gi", numbers_too=False))]
GithubUser = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9-]{1,39}$")]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)
