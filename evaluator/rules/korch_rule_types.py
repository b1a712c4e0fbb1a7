"""The static rules' two records: a Rule (a row of the table in korch_rules)
and a Finding (one hit of a check). A leaf: it imports nothing of korch's."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable


@dataclasses.dataclass(frozen=True)
class Rule:
    """One static rule. `message` says what is refused, `threat` the escape
    or measurement hack it stops (and, for rules that match narrowly, which
    other guard covers the rest), `fix` how a correct candidate complies."""
    id: str
    message: str
    stage: str  # python | load_inline | flags | native | symbols
    check: Callable[[Any], Iterable[tuple[int, str]]] | None = None  # takes a korch_context.Context
    threat: str = ""
    fix: str = ""


@dataclasses.dataclass
class Finding:
    rule: str
    line: int
    detail: str = ""
