"""The rule-authoring API, re-exported for ``from egtile.rules.api import ...`` (its home is
:mod:`egtile.schedule.rule` and :mod:`egtile.schedule.decision`)."""

from egtile.schedule.decision import Cost, CostInput, Decision, static
from egtile.schedule.rule import (
    STAGES,
    Condition,
    FactSpec,
    NumSpec,
    Rule,
    RuleSet,
    Violation,
    form_condition,
    holds,
    stmt_condition,
)
from egtile.verdict import Verdict

__all__ = ["STAGES", "Condition", "Cost", "CostInput", "Decision", "FactSpec", "NumSpec", "Rule", "RuleSet", "Verdict",
           "Violation", "form_condition", "holds", "static", "stmt_condition"]
