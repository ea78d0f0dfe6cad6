"""The composition's own errors: a saved config that cannot be read, nothing that can compose."""

from ...errors import UsageError


class FileUnreadable(UsageError):
    """The saved config (``--file``/``--config``) cannot be read as a config: malformed YAML or
    JSON, or not a mapping. verl would fail on it too (a FAIL row in ``check``, exit 2 in
    ``config``)."""


class ComposeUnsupported(Exception):
    """Nothing can compose what was asked: no stored config tree for the release or config name,
    or no Hydra in the checker itself; ``fix`` says what to do."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix
