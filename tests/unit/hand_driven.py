"""A `BaseElector` whose algorithm is the test itself: unit tests of the base call its transitions by hand
(`_acquire`, `_extend`, `_revoke`, `_fence`, `_renewed`...); subclasses set what a method would declare."""

from __future__ import annotations

from elect.base import BaseElector
from elect.contract import Characteristics
from elect.roles import Role


class HandDriven(BaseElector):
    scheme = "test"

    @property
    def characteristics(self) -> Characteristics:
        return Characteristics(True, 0.0, 1.0, True, "test")

    def _on_start(self) -> None: ...

    def _on_stop(self, timeout: float | None) -> None:
        for role in list(self.leading()):
            self._revoke(role)

    def _on_resign(self, role: Role) -> None:
        self._revoke(role)

    def _on_roles_changed(self, added: tuple[Role, ...], removed: tuple[Role, ...]) -> None: ...
