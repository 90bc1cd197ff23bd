"""The built-in judges; importing this package registers them."""

from judges.builtin.answer import AnswerJudge
from judges.builtin.assertions import AssertionsJudge
from judges.builtin.composite import CompositeJudge
from judges.builtin.efficiency import EfficiencyJudge
from judges.builtin.process import ProcessJudge
from judges.builtin.static import StaticJudge
from judges.builtin.tests import TestsJudge

__all__ = [
    "AnswerJudge",
    "AssertionsJudge",
    "CompositeJudge",
    "EfficiencyJudge",
    "ProcessJudge",
    "StaticJudge",
    "TestsJudge",
]
