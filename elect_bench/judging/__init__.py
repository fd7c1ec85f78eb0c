"""Judging a run, the same for real members and simulated ones: the merged history of every member's event lines
and the faults struck (`history`), the measurements defined in docs/architecture.md (`measures`), and the checker
of what each method promised (`checker`)."""
