"""Errors the user can act on: printed as one line, never as a traceback."""


class UserError(Exception):
    """Bad input or an unusable target; the message says what is wrong and what to do."""


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived; the run stops and cleans up."""

    def __init__(self, signum: int):
        super().__init__(f"signal {signum}")
        self.signum = signum
