"""Errors the runtime raises at the user's script. Each names what is wrong and how to fix it."""


class FulcrumError(RuntimeError):
    """Base of the runtime's errors."""


class NotUnderFulcrumError(FulcrumError):
    """fulcrum.init() found none of what the operator puts in a trainer pod."""


class ConfigurationError(FulcrumError, ValueError):
    """A setting (environment variable or keyword) is missing or malformed."""


class CoordinatorRefusedError(FulcrumError):
    """The coordinator refused this trainer for good (wrong token, invalid message)."""


class UsageError(FulcrumError, ValueError):
    """The training loop used the API in a way that cannot give correct training."""


class MembershipChanged(FulcrumError):
    """The job re-forms after the step just ended (a member left or joined). Raised out of the
    data loader's iteration; job.elastic() catches it, joins the next generation, syncs the
    State and calls the training function again."""


class CollectiveFailed(FulcrumError):
    """An all-reduce of this generation failed (a peer died or timed out): the step is not
    committed. job.elastic() catches it, asks the coordinator for a new generation, and resumes
    from the last committed step."""
