"""Exceptions the CLI turns into one line: mistakes a user can fix (exit code 2) and interruptions (130)."""


class UserError(Exception):
    """Something in the user's input, files or flags is wrong; the message says what and how to fix it."""


class ConfigError(UserError):
    """A config file or override is invalid."""


class Interrupted(Exception):
    """Training stopped by SIGINT/SIGTERM after writing its last checkpoint (the CLI exits with 130)."""
