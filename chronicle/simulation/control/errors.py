"""What a run's controls refuse, with the reason the writer is shown (services and branching raise it)."""


class ControlError(Exception):
    pass
