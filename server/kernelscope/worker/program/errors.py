# pyright: basic
"""The worker's two exceptions: a job failure the user can act on, and a cancel."""


class JobError(Exception):
    """A job failure with a cause the user can act on."""

    def __init__(self, kind, message, path=None, line=None, hint=None, tb=None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.path = path
        self.line = line
        self.hint = hint
        self.tb = tb or []
        self.memory = None  # a CUDA OOM's memory at the failure (phases.oom_told)


class Cancelled(Exception):
    """Raised in the main thread when the server cancels the running job."""
