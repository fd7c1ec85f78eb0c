"""The exceptions a user of `elect` can meet, each saying what to do about it."""

from __future__ import annotations


class ElectError(Exception):
    """Base of every error raised by elect."""


class ConfigError(ElectError, ValueError):
    """A URL, YAML file or option is wrong; the message names the parameter and the rule."""

    def __init__(self, message: str, *, parameter: str | None = None) -> None:
        self.parameter = parameter
        super().__init__(f"{parameter}: {message}" if parameter else message)


class UnknownScheme(ConfigError):
    """No installed implementation serves this URL scheme."""


class MissingExtra(ElectError, ImportError):
    """An implementation needs packages that are not installed; the message gives the pip command."""


class UnsatisfiedRequirement(ElectError):
    """The chosen implementation does not promise a property the caller demanded at connect time."""


class InfrastructureUnavailable(ElectError, ConnectionError):
    """The broker, store or peers could not be reached within the configured time."""


class AccessRefused(InfrastructureUnavailable):
    """The broker or store answered but refused this client: a wrong user or password, a client certificate
    missing or not trusted, TLS on one side only, or no permission. The message names what was refused and never
    the secret; trying again with the same settings will not help."""


class StateUnreadable(ElectError):
    """A member's durable state (a Raft node's term and vote) is damaged where no crash could have left it: starting
    on what can be read could break a promise made before (a vote given twice in one term). The message names the
    file and where it is damaged; restore it, or retire the node's data and start it as a new member."""


class ElectorFailed(ElectError):
    """The elector stopped on its own while running, and leads nothing from then on: its loop met what it cannot go
    on from (a Raft node whose term and vote cannot be written to its disk, an error in the loop itself). Every
    leadership was fenced when it stopped; it does not come back. `Elector.failure` holds it, and `elect member`
    exits 4 with its message. Fix the cause the message names, then start a new elector (a new process)."""


class NotStarted(ElectError, RuntimeError):
    """An operation needs a started elector."""


class NotSupported(ElectError):
    """The chosen implementation cannot do what was asked; the message says why (choose another method, or
    demand the property at connect time with `require=`)."""


class NotLeader(ElectError):
    """The operation needs this member to lead the role, and it does not (or no longer does)."""


class TransferRefused(ElectError):
    """`transfer` cannot hand the role to the named member; the message says why (not a member of the role's
    group, not heard from lately, or not contending for the role)."""
