"""The one exception type for mistakes a user can fix: the CLI prints it as one line and exits with 2."""


class UserError(Exception):
    """Something in the user's input, files or flags is wrong; the message says what and how to fix it."""


class ConfigError(UserError):
    """A config file or override is invalid."""
