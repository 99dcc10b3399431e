"""Whose change a coordinator plan answers, from its reason (issue 25).

The balancer names the changes a plan answers: "...; answers v100's speed x1.00 -> x0.84,
a100's move; moves: ...". scripts/demo and scripts/local-train count the plans that answer a
slowdown apart from those answering other trainers' changes (on shared cores, the core a slowed
trainer frees speeds another up, and bursts of contention come and go), within the window the
issue's controller tests use: "at most 2 speed rebalances in 30 steps".
"""

ANSWER_WINDOW_STEPS = 30


def answered(reason):
    """The reason's "answers ..." part, or "" when the plan names no change it answers."""
    return next((part for part in reason.split("; ") if part.startswith("answers ")), "")


def names_any(reason, pods):
    """Whether the plan says it answers a change of one of `pods`."""
    part = answered(reason)
    return any(f"{pod}'s " in part for pod in pods)


def answers_only_others(reason, pods):
    """Whether the plan names the changes it answers and none of them is one of `pods`'."""
    return bool(answered(reason)) and not names_any(reason, pods)
